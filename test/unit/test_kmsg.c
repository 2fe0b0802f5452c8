/* test_kmsg.c - unit tests of the kernel-log parser (src/signal/kmsg.c):
 * every line of the labelled corpora gets its label, the signals carry the
 * right fields and stamps for each wrapper, and the output does not depend on
 * how the input is chunked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "signal/kmsg.h"
#include "signal/signal.h"
#include "kmsg_fixture.h"

/* ---- helpers ---------------------------------------------------------------- */

/* 2025-11-29T08:00:00Z */
#define NOW_NS (1764403200LL * GH_NS_PER_S)
/* a boot at 2025-11-01T00:00:00Z */
#define BOOT_NS (1761955200LL * GH_NS_PER_S)

static int64_t now_ns = NOW_NS;
static const struct gh_clock test_clock = {clock_fixed, &now_ns};

struct coll {
    struct gh_kmsg_parser *p;
    struct rec *v;
    size_t n, cap;
    int fail_with;      /* emit returns this when non-zero */
    /* labels seen by on_line */
    struct gh_kmsg_label *labels;
    size_t nl, lcap;
};

static int collect(void *ctx, const struct gh_signal *s)
{
    struct coll *c = ctx;
    if (c->fail_with)
        return c->fail_with;
    rec_push(&c->v, &c->n, &c->cap, s, c->p);
    return 0;
}

static void on_line(void *ctx, const char *line, size_t len, const struct gh_kmsg_label *l)
{
    (void)line, (void)len;
    struct coll *c = ctx;
    if (c->nl == c->lcap) {
        size_t cap = c->lcap ? 2 * c->lcap : 64;
        struct gh_kmsg_label *v = realloc(c->labels, cap * sizeof *v);
        assert_non_null(v);
        c->labels = v, c->lcap = cap;
    }
    c->labels[c->nl++] = *l;
}

static void coll_free(struct coll *c)
{
    rec_free_all(c->v, c->n);
    free(c->labels);
    gh_kmsg_parser_free(c->p);
    memset(c, 0, sizeof *c);
}

static void opts_std(struct gh_kmsg_opts *o, struct coll *c)
{
    gh_kmsg_opts_init(o);
    o->node = "gpu-17";
    o->clock = &test_clock;
    o->boot_time_ns = BOOT_NS;
    o->emit = collect;
    o->emit_ctx = c;
}

static void coll_new(struct coll *c, const struct gh_kmsg_opts *o)
{
    memset(c, 0, sizeof *c);
    struct gh_err err = {{0}};
    if (gh_kmsg_parser_new(&c->p, o, &err))
        fail_msg("parser_new: %s", err.msg);
}

static void coll_std(struct coll *c)
{
    struct gh_kmsg_opts o;
    opts_std(&o, c);
    coll_new(c, &o);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? 2 * cap : 65536;
            char *b = realloc(buf, cap);
            assert_non_null(b);
            buf = b;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        if (k == 0)
            break;
        n += k;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* A labelled corpus: the raw lines joined into one log, and their labels. */
struct corpus {
    char *log;
    size_t log_len;
    struct gh_kmsg_label *want;
    char **raw;
    size_t n;
};

static void corpus_load(struct corpus *cp, const char *path)
{
    size_t len;
    char *text = read_all(path, &len);
    memset(cp, 0, sizeof *cp);
    cp->log = malloc(len + 1);
    cp->want = calloc(len / 8 + 1, sizeof *cp->want);
    cp->raw = calloc(len / 8 + 1, sizeof *cp->raw);
    assert_non_null(cp->log);
    assert_non_null(cp->want);
    assert_non_null(cp->raw);
    for (size_t i = 0; i < len;) {
        char *nl = memchr(text + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - text) : len;
        char *line = text + i;
        size_t ll = e - i;
        i = e + 1;
        if (ll == 0 || line[0] == '#')
            continue;
        char *tab = memchr(line, '\t', ll);
        if (!tab)
            fail_msg("%s: no tab in '%.*s'", path, (int)ll, line);
        if (gh_kmsg_label_parse(line, (size_t)(tab - line), &cp->want[cp->n]))
            fail_msg("%s: bad label '%.*s'", path, (int)(tab - line), line);
        size_t rl = ll - (size_t)(tab - line) - 1;
        cp->raw[cp->n] = cp->log + cp->log_len;
        memcpy(cp->log + cp->log_len, tab + 1, rl);
        cp->log_len += rl;
        cp->log[cp->log_len++] = '\n';
        cp->n++;
    }
    free(text);
}

static void corpus_free(struct corpus *cp)
{
    free(cp->log);
    free(cp->want);
    free(cp->raw);
}

static bool label_eq(const struct gh_kmsg_label *a, const struct gh_kmsg_label *b)
{
    if (a->cls != b->cls)
        return false;
    if (a->cls == GH_KMSG_XID || a->cls == GH_KMSG_SXID)
        return a->code == b->code;
    if (a->cls == GH_KMSG_OTHER)
        return a->other == b->other;
    return true;
}

static const char *str_or(const char *s)
{
    return s ? s : "-";
}

/* One signal as a line of text, for whole-run comparisons. */
static void sig_text(const struct rec *r, char *buf, size_t cap)
{
    const struct gh_signal *s = &r->sig;
    char ts[GH_RFC3339_MAX];
    snprintf(buf, cap, "%s %s code=%d pci=%s pid=%s%lld proc=%s sw=%s ctr=%s n=%s%lld node=%s "
             "id=%s ts=%s line=%llu gi=%d ci=%d fold=%d msg=%s",
             gh_source_name(s->source), gh_kind_name(s->kind), s->code, str_or(s->pci),
             s->has_pid ? "" : "-", (long long)s->pid, str_or(s->process), str_or(s->switch_id),
             str_or(s->counter), s->has_count ? "" : "-", (long long)s->count, str_or(s->node),
             str_or(s->id),
             gh_time_format_rfc3339(s->ts_ns, ts, sizeof ts), (unsigned long long)r->meta.line_no,
             r->meta.gpu_instance, r->meta.compute_instance, r->meta.folded, str_or(s->msg));
}

/* Checks every line's label, through feed (on_line) and through the per-line
 * API, and returns the number of mismatches after printing them. */
static void check_corpus_labels(const char *path)
{
    struct corpus cp;
    corpus_load(&cp, path);
    assert_true(cp.n > 0);

    struct coll c;
    struct gh_kmsg_opts o;
    opts_std(&o, &c);
    o.on_line = on_line;
    o.line_ctx = &c;
    coll_new(&c, &o);
    assert_int_equal(gh_kmsg_parser_feed(c.p, cp.log, cp.log_len, NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.nl, cp.n);

    struct coll c2;
    coll_std(&c2);
    size_t bad = 0;
    for (size_t i = 0; i < cp.n; i++) {
        const char *e = memchr(cp.raw[i], '\n', cp.log_len);
        struct gh_kmsg_label got;
        assert_int_equal(gh_kmsg_parser_line(c2.p, cp.raw[i], (size_t)(e - cp.raw[i]), &got, NULL),
                         GH_OK);
        char w[GH_KMSG_LABEL_MAX], g1[GH_KMSG_LABEL_MAX], g2[GH_KMSG_LABEL_MAX];
        gh_kmsg_label_format(&cp.want[i], w, sizeof w);
        gh_kmsg_label_format(&c.labels[i], g1, sizeof g1);
        gh_kmsg_label_format(&got, g2, sizeof g2);
        if (!label_eq(&cp.want[i], &c.labels[i]) || !label_eq(&cp.want[i], &got)) {
            print_error("%s:%zu: want %s, feed %s, line %s: %.*s\n", path, i + 1, w, g1, g2,
                        (int)(e - cp.raw[i]), cp.raw[i]);
            bad++;
        }
    }
    /* both paths emit the same signals */
    assert_int_equal(gh_kmsg_parser_flush(c2.p, NULL), GH_OK);
    assert_int_equal(c.n, c2.n);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.lines, cp.n);
    assert_int_equal(st.signals, c.n);
    coll_free(&c);
    coll_free(&c2);
    corpus_free(&cp);
    assert_int_equal(bad, 0);
}

/* Feeds text through a fresh parser in chunks given by sizes (cycled; 0 =
 * whole) and returns the signals as one string. */
static char *run_chunked(const char *text, size_t len, const size_t *sizes, size_t nsizes,
                         bool with_on_line, struct gh_kmsg_stats *st)
{
    struct coll c;
    struct gh_kmsg_opts o;
    opts_std(&o, &c);
    o.boot_id = "b00t";
    if (with_on_line) {
        o.on_line = on_line;
        o.line_ctx = &c;
    }
    coll_new(&c, &o);
    size_t off = 0, k = 0;
    while (off < len) {
        size_t n = nsizes ? sizes[k++ % nsizes] : len;
        if (n == 0 || n > len - off)
            n = len - off;
        assert_int_equal(gh_kmsg_parser_feed(c.p, text + off, n, NULL), GH_OK);
        off += n;
    }
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    gh_kmsg_parser_stats(c.p, st);
    size_t cap = 1 << 20, used = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    out[0] = '\0';
    char line[16384];
    for (size_t i = 0; i < c.n; i++) {
        sig_text(&c.v[i], line, sizeof line);
        size_t l = strlen(line);
        if (used + l + 2 > cap) {
            cap = 2 * cap + l;
            char *b = realloc(out, cap);
            assert_non_null(b);
            out = b;
        }
        memcpy(out + used, line, l);
        used += l;
        out[used++] = '\n';
        out[used] = '\0';
    }
    coll_free(&c);
    return out;
}

static const struct rec *find_sig(const struct coll *c, enum gh_kind kind, const char *msg_part)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].sig.kind == kind && c->v[i].sig.msg && strstr(c->v[i].sig.msg, msg_part))
            return &c->v[i];
    fail_msg("no %s signal with '%s'", gh_kind_name(kind), msg_part);
    return NULL;
}

static size_t count_kind(const struct coll *c, enum gh_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->v[i].sig.kind == kind;
    return n;
}

static void feed_str(struct coll *c, const char *s)
{
    struct gh_err err = {{0}};
    if (gh_kmsg_parser_feed(c->p, s, strlen(s), &err))
        fail_msg("feed: %s", err.msg);
}

static int64_t iso(const char *s)
{
    int64_t ns;
    assert_true(gh_time_parse_rfc3339(s, strlen(s), &ns));
    return ns;
}

/* ---- corpora ---------------------------------------------------------------- */

static void test_sample_labels(void **state)
{
    (void)state;
    check_corpus_labels(GH_SHARED_DIR "/data/kmsg-samples.txt");
}

static void test_extra_labels(void **state)
{
    (void)state;
    check_corpus_labels(GH_SOURCE_DIR "/test/data/kmsg-extra.txt");
}

static void test_real_corpus_labels(void **state)
{
    (void)state;
    check_corpus_labels(GH_SOURCE_DIR "/test/data/kmsg-corpus-extra.txt");
}

static void test_real_corpus2_labels(void **state)
{
    (void)state;
    check_corpus_labels(GH_SOURCE_DIR "/test/data/kmsg-corpus-extra2.txt");
}

/* The same text in any chunking (and with on_line) yields the same signals,
 * labels counts and line counts. */
static void test_chunking_invariance(void **state)
{
    (void)state;
    struct corpus a, b, r, r2;
    corpus_load(&a, GH_SHARED_DIR "/data/kmsg-samples.txt");
    corpus_load(&b, GH_SOURCE_DIR "/test/data/kmsg-extra.txt");
    corpus_load(&r, GH_SOURCE_DIR "/test/data/kmsg-corpus-extra.txt");
    corpus_load(&r2, GH_SOURCE_DIR "/test/data/kmsg-corpus-extra2.txt");
    size_t len = a.log_len + b.log_len + r.log_len + r2.log_len;
    char *text = malloc(len);
    assert_non_null(text);
    memcpy(text, a.log, a.log_len);
    memcpy(text + a.log_len, b.log, b.log_len);
    memcpy(text + a.log_len + b.log_len, r.log, r.log_len);
    memcpy(text + a.log_len + b.log_len + r.log_len, r2.log, r2.log_len);

    struct gh_kmsg_stats s0, s1;
    char *whole = run_chunked(text, len, NULL, 0, false, &s0);
    assert_true(s0.signals > 50);
    const size_t one[] = {1};
    const size_t odd[] = {7, 3, 61, 1, 200, 13, 4096, 2};
    const size_t prime[] = {97};
    const size_t *plans[] = {one, odd, prime};
    const size_t nplans[] = {1, 8, 1};
    for (size_t i = 0; i < 3; i++) {
        char *got = run_chunked(text, len, plans[i], nplans[i], false, &s1);
        assert_string_equal(whole, got);
        assert_int_equal(s0.lines, s1.lines);
        assert_int_equal(s0.matched, s1.matched);
        assert_int_equal(s0.signals, s1.signals);
        assert_int_equal(s0.folded, s1.folded);
        assert_int_equal(s0.rejected, s1.rejected);
        free(got);
    }
    char *got = run_chunked(text, len, odd, 8, true, &s1);
    assert_string_equal(whole, got);
    free(got);
    free(whole);
    free(text);
    corpus_free(&a);
    corpus_free(&b);
    corpus_free(&r);
    corpus_free(&r2);
}

/* ---- signal contents -------------------------------------------------------- */

static void test_sample_signals(void **state)
{
    (void)state;
    size_t len;
    char *text = read_all(GH_SHARED_DIR "/data/kmsg-samples.txt", &len);
    struct coll c;
    coll_std(&c);
    /* feed only the raw parts */
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        char *e = nl ? nl : text + len;
        char *tab = memchr(line, '\t', (size_t)(e - line));
        assert_non_null(tab);
        assert_int_equal(gh_kmsg_parser_feed(c.p, tab + 1, (size_t)(e - tab), NULL), GH_OK);
        line = e + 1;
    }
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);

    for (size_t i = 0; i < c.n; i++) {
        assert_int_equal(c.v[i].sig.source, GH_SRC_KMSG);
        assert_string_equal(c.v[i].sig.node, "gpu-17");
        assert_int_equal(c.v[i].sig.gpu, -1);
        assert_non_null(c.v[i].sig.msg);
    }
    assert_int_equal(count_kind(&c, GH_KIND_XID), 26);
    assert_int_equal(count_kind(&c, GH_KIND_SXID), 7);
    assert_int_equal(count_kind(&c, GH_KIND_GPU_LOST), 2);
    assert_int_equal(count_kind(&c, GH_KIND_PCIE), 3);
    assert_int_equal(count_kind(&c, GH_KIND_NIC), 1);

    const struct rec *r = find_sig(&c, GH_KIND_XID, "Expected function 103");
    assert_int_equal(r->sig.code, 119);
    assert_string_equal(r->sig.pci, "0000:9b:00.0");
    assert_true(r->sig.has_pid);
    assert_int_equal(r->sig.pid, 2024380);
    assert_string_equal(r->sig.process, "nvidia-smi");
    assert_int_equal(r->sig.ts_ns, iso("2025-02-23T16:24:18Z"));
    assert_int_equal(r->meta.stamp, GH_KMSG_STAMP_WALL);
    assert_true(strncmp(r->sig.msg, "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380", 44) == 0);

    r = find_sig(&c, GH_KIND_XID, "Multiple Warp Errors");   /* pid='<unknown>' */
    assert_int_equal(r->sig.code, 13);
    assert_false(r->sig.has_pid);
    assert_null(r->sig.process);
    assert_string_equal(r->sig.pci, "0000:cb:00.0");

    r = find_sig(&c, GH_KIND_XID, "RLW_RXPIPE");              /* PCI elided */
    assert_int_equal(r->sig.code, 145);
    assert_null(r->sig.pci);
    assert_int_equal(r->meta.stamp, GH_KMSG_STAMP_NONE);
    assert_int_equal(r->sig.ts_ns, NOW_NS);

    r = find_sig(&c, GH_KIND_XID, "Channel 00000001");        /* no "PCI:" */
    assert_int_equal(r->sig.code, 14);
    assert_string_equal(r->sig.pci, "0000:03:00.0");

    r = find_sig(&c, GH_KIND_XID, "(PCI:0009:01:00): 154");   /* domain 0009 */
    assert_string_equal(r->sig.pci, "0009:01:00.0");
    assert_int_equal(r->sig.ts_ns, BOOT_NS + 171167621162000LL);
    assert_int_equal(r->meta.stamp, GH_KMSG_STAMP_BOOT);

    r = find_sig(&c, GH_KIND_XID, "(PCI:0000:00:05)");
    assert_string_equal(r->sig.pci, "0000:00:05.0");

    r = find_sig(&c, GH_KIND_XID, "caused by previous Xid 145");
    assert_int_equal(r->sig.code, 45);
    assert_int_equal(r->meta.caused_by_xid, 145);
    assert_string_equal(r->sig.process, "python3");

    r = find_sig(&c, GH_KIND_XID, "HUBCLIENT_HOST_CPU");      /* pid without name */
    assert_int_equal(r->sig.pid, 12890);
    assert_null(r->sig.process);
    assert_int_equal(r->sig.ts_ns, iso("2025-11-29T11:28:11Z"));

    r = find_sig(&c, GH_KIND_XID, "(PCI:0000:01:00): 79");    /* syslog wins over [65.3] */
    assert_int_equal(r->sig.ts_ns, iso("2025-03-21T20:18:56Z"));

    r = find_sig(&c, GH_KIND_GPU_LOST, "GPU 0000:91:00.0: GPU has fallen off the bus");
    assert_string_equal(r->sig.pci, "0000:91:00.0");
    assert_int_equal(r->meta.label.other, GH_KMSG_O_GPU_FALLEN_OFF_BUS);

    r = find_sig(&c, GH_KIND_GPU_LOST, "The NVIDIA GPU 0000:b3:00.0");  /* two lines, one event */
    assert_string_equal(r->sig.pci, "0000:b3:00.0");
    assert_string_equal(r->sig.msg, "NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                                    "NVRM: fallen off the bus and is not responding to commands.");
    assert_int_equal(r->sig.ts_ns, BOOT_NS + 1843308145000LL);

    r = find_sig(&c, GH_KIND_SXID, "Link 48 LTSSM");
    assert_int_equal(r->sig.code, 20034);
    assert_string_equal(r->sig.switch_id, "nvidia-nvswitch1");
    assert_string_equal(r->sig.pci, "0000:06:00.0");
    /* the Data line of another switch is not folded into it */
    assert_int_equal(r->meta.folded, 0);
    r = find_sig(&c, GH_KIND_SXID, "Data {0x10000000");
    assert_string_equal(r->sig.switch_id, "nvidia-nvswitch0");

    r = find_sig(&c, GH_KIND_NIC, "insufficient power");
    assert_string_equal(r->sig.counter, "pcie_insufficient_power");
    assert_string_equal(r->sig.pci, "0000:5c:00.0");
    assert_true(r->sig.has_count);     /* the first such line for this adapter */
    assert_int_equal(r->sig.count, 1);
    assert_int_equal(r->sig.ts_ns, iso("2024-12-01T14:54:40Z"));
    assert_true(strncmp(r->sig.msg, "mlx5_core 0000:5c:00.0:", 23) == 0);

    r = find_sig(&c, GH_KIND_PCIE, "can't recover");
    assert_string_equal(r->sig.counter, "aer_recovery_failed");
    assert_string_equal(r->sig.pci, "0000:03:00.0");
    assert_int_equal(r->sig.ts_ns, NOW_NS);        /* relative dmesg -H stamp */
    r = find_sig(&c, GH_KIND_PCIE, "Root Port link has been reset");
    assert_string_equal(r->sig.counter, "link_reset");
    assert_string_equal(r->sig.pci, "0000:00:03.0");
    r = find_sig(&c, GH_KIND_PCIE, "severity=Correctable");
    assert_string_equal(r->sig.counter, "aer_correctable");
    assert_string_equal(r->sig.pci, "0000:00:03.1");
    assert_int_equal(r->sig.ts_ns, iso("2025-09-19T16:18:02Z"));

    /* PCI -> UUID map */
    const char *want = "GPU-509665ad-b600-ac93-3616-d754b23d636d";
    assert_string_equal(gh_kmsg_parser_uuid(c.p, "0000:9b:00.0"), want);
    assert_string_equal(gh_kmsg_parser_uuid(c.p, "PCI:0000:9B:00"), want);
    assert_string_equal(gh_kmsg_parser_uuid(c.p, "00000000:9b:00.0"), want);
    assert_null(gh_kmsg_parser_uuid(c.p, "0000:9c:00.0"));
    assert_null(gh_kmsg_parser_uuid(c.p, "garbage"));

    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.lines, 61);
    assert_int_equal(st.xid_lines, 26);
    assert_int_equal(st.sxid_lines, 7);
    assert_int_equal(st.rejected, 0);
    assert_int_equal(st.signals, c.n);
    free(text);
    coll_free(&c);
}

/* ---- time stamps of each wrapper -------------------------------------------- */

struct stamp_case {
    const char *line;
    const char *want;      /* RFC 3339, or NULL = clock now */
    enum gh_kmsg_stamp kind;
};

static void check_stamps(const struct stamp_case *cases, size_t n, int64_t boot, int year,
                         int32_t tz)
{
    for (size_t i = 0; i < n; i++) {
        struct coll c;
        struct gh_kmsg_opts o;
        opts_std(&o, &c);
        o.boot_time_ns = boot;
        o.default_year = year;
        o.tz_offset_s = tz;
        coll_new(&c, &o);
        struct gh_kmsg_label l;
        assert_int_equal(gh_kmsg_parser_line(c.p, cases[i].line, strlen(cases[i].line), &l, NULL),
                         GH_OK);
        assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
        if (c.n != 1)
            fail_msg("%zu signals from %s", c.n, cases[i].line);
        int64_t want = cases[i].want ? iso(cases[i].want) : NOW_NS;
        if (c.v[0].sig.ts_ns != want || c.v[0].meta.stamp != cases[i].kind) {
            char got[GH_RFC3339_MAX];
            fail_msg("%s: ts %s stamp %d, want %s stamp %d", cases[i].line,
                     gh_time_format_rfc3339(c.v[0].sig.ts_ns, got, sizeof got),
                     c.v[0].meta.stamp, cases[i].want ? cases[i].want : "now", cases[i].kind);
        }
        coll_free(&c);
    }
}

#define XID " NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."

static void test_timestamps(void **state)
{
    (void)state;
    static const struct stamp_case known_boot[] = {
        {"4,1227,437812449,c;NVRM: Xid (PCI:0000:01:00): 43, Ch 00000018",
         "2025-11-01T00:07:17.812449Z", GH_KMSG_STAMP_BOOT},
        {"4,1227,437812449,c,1,-;NVRM: Xid (PCI:0000:01:00): 43, Ch 00000018",
         "2025-11-01T00:07:17.812449Z", GH_KMSG_STAMP_BOOT},
        {"[ 1108.858286]" XID, "2025-11-01T00:18:28.858286Z", GH_KMSG_STAMP_BOOT},
        {"[6781741.548779]" XID, "2026-01-18T11:49:01.548779Z", GH_KMSG_STAMP_BOOT},
        {"[Sun Feb 23 16:24:18 2025]" XID, "2025-02-23T16:24:18Z", GH_KMSG_STAMP_WALL},
        {"[Fri Aug  9 13:32:56 2024]" XID, "2024-08-09T13:32:56Z", GH_KMSG_STAMP_WALL},
        {"[  +0.000844]" XID, NULL, GH_KMSG_STAMP_NONE},
        {"[...]" XID, NULL, GH_KMSG_STAMP_NONE},
        {"kernel:" XID, NULL, GH_KMSG_STAMP_NONE},
        {XID + 1, NULL, GH_KMSG_STAMP_NONE},
        {"Nov 29 11:28:11 zeus kernel:" XID, "2025-11-29T11:28:11Z", GH_KMSG_STAMP_WALL},
        {"Nov  2 01:02:03.250 zeus kernel:" XID, "2025-11-02T01:02:03.25Z", GH_KMSG_STAMP_WALL},
        /* December seen in November of 2025 is last year's */
        {"Dec 31 23:59:59 zeus kernel:" XID, "2024-12-31T23:59:59Z", GH_KMSG_STAMP_WALL},
        {"Mar 21 20:18:56 pc kernel: [   65.315783]" XID, "2025-03-21T20:18:56Z",
         GH_KMSG_STAMP_WALL},
        {"192.168.11.119: kern: warning: [2026-04-22T21:30:51.526447914Z]:" XID,
         "2026-04-22T21:30:51.526447914Z", GH_KMSG_STAMP_WALL},
        {"2026-04-22T21:30:54.123456+02:00 gpu-node-3 kernel:" XID,
         "2026-04-22T19:30:54.123456Z", GH_KMSG_STAMP_WALL},
        {"2026-04-22T21:30:53+0000 gpu-node-3 kernel:" XID, "2026-04-22T21:30:53Z",
         GH_KMSG_STAMP_WALL},
        {"<3>1 2026-04-22T21:30:52.000001Z gpu-node-3 kernel - - -" XID,
         "2026-04-22T21:30:52.000001Z", GH_KMSG_STAMP_WALL},
        {"<3>Nov 29 11:28:11 zeus kernel:" XID, "2025-11-29T11:28:11Z", GH_KMSG_STAMP_WALL},
        {"[Nov29 11:28]" XID, "2025-11-29T11:28:00Z", GH_KMSG_STAMP_WALL},
        {"[  130.456250] [ T1946]" XID, "2025-11-01T00:02:10.45625Z", GH_KMSG_STAMP_BOOT},
    };
    check_stamps(known_boot, sizeof known_boot / sizeof known_boot[0], BOOT_NS, 0, 0);

    /* boot time unknown: since-boot stamps fall back to the clock */
    static const struct stamp_case unknown_boot[] = {
        {"4,1227,437812449,c;NVRM: Xid (PCI:0000:01:00): 43, Ch 00000018", NULL,
         GH_KMSG_STAMP_NONE},
        {"[ 1108.858286]" XID, NULL, GH_KMSG_STAMP_NONE},
        {"[Sun Feb 23 16:24:18 2025]" XID, "2025-02-23T16:24:18Z", GH_KMSG_STAMP_WALL},
    };
    check_stamps(unknown_boot, 3, GH_KMSG_BOOT_UNKNOWN, 0, 0);

    /* default year and a time zone for zone-less stamps */
    static const struct stamp_case zoned[] = {
        {"Nov 29 11:28:11 zeus kernel:" XID, "2023-11-29T10:28:11Z", GH_KMSG_STAMP_WALL},
        {"[Sun Feb 23 16:24:18 2025]" XID, "2025-02-23T15:24:18Z", GH_KMSG_STAMP_WALL},
        {"2026-04-22T21:30:53Z host kernel:" XID, "2026-04-22T21:30:53Z", GH_KMSG_STAMP_WALL},
        {"2026-04-22 21:30:53 host kernel:" XID, "2026-04-22T20:30:53Z", GH_KMSG_STAMP_WALL},
    };
    check_stamps(zoned, 4, BOOT_NS, 2023, 3600);
}

/* ---- kmsg sequence numbers, ids -------------------------------------------- */

static void test_seq_and_id(void **state)
{
    (void)state;
    struct coll c;
    struct gh_kmsg_opts o;
    opts_std(&o, &c);
    o.boot_id = "5f1c";
    coll_new(&c, &o);
    uint64_t seq = 0;
    assert_false(gh_kmsg_parser_last_seq(c.p, &seq));
    feed_str(&c, "4,2215,6781741548779,-;NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.\n");
    assert_int_equal(c.n, 1);
    assert_true(c.v[0].meta.has_seq);
    assert_int_equal(c.v[0].meta.seq, 2215);
    assert_string_equal(c.v[0].sig.id, "gpu-17/5f1c/2215");
    assert_true(gh_kmsg_parser_last_seq(c.p, &seq));
    assert_int_equal(seq, 2215);
    /* noise records move the sequence too (the agent persists it) */
    feed_str(&c, "6,2216,6781741548800,-;eth0: link up\n6,2217,6781741548900,-;eth1: link up\n");
    assert_true(gh_kmsg_parser_last_seq(c.p, &seq));
    assert_int_equal(seq, 2217);
    feed_str(&c, "6,2218,6781741549000,-;partial");
    assert_int_equal(gh_kmsg_parser_last_seq(c.p, &seq) && seq == 2217, 1);
    feed_str(&c, " line\n");
    assert_true(gh_kmsg_parser_last_seq(c.p, &seq));
    assert_int_equal(seq, 2218);
    /* the per-line API sees noise records too */
    const char *rec = "6,2300,6781741549100,-;usb 1-1: new high-speed USB device";
    assert_int_equal(gh_kmsg_parser_line(c.p, rec, strlen(rec), NULL, NULL), GH_OK);
    assert_true(gh_kmsg_parser_last_seq(c.p, &seq));
    assert_int_equal(seq, 2300);
    /* no seq, no id */
    feed_str(&c, "NVRM: Xid (PCI:0000:91:00): 13, Ch 00000001\n");
    assert_int_equal(c.n, 2);
    assert_false(c.v[1].meta.has_seq);
    assert_null(c.v[1].sig.id);
    coll_free(&c);
}

/* ---- MIG, pid/name forms ------------------------------------------------------ */

static void test_mig_and_fields(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    feed_str(&c,
             "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 31, pid=4242, name=python3, Ch 00000008\n"
             "NVRM: Xid (PCI:0000:3b:00 GPU-I:02): 43, pid=4242, name=python3, Ch 00000010\n"
             "NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=ray::WorkerDict, Ch 00000010\n"
             "NVRM: Xid (PCI:0000:3b:00): 43, pid=77, name=KMS thread, Ch 00000010\n"
             "NVRM: Xid (PCI:0000:3B:00): 62, 323f0f30 0000c3d8 00000000\n"
             "NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus\n");
    assert_int_equal(c.n, 6);
    assert_int_equal(c.v[0].meta.gpu_instance, 1);
    assert_int_equal(c.v[0].meta.compute_instance, 0);
    assert_string_equal(c.v[0].sig.pci, "0000:3b:00.0");
    assert_true(strstr(c.v[0].sig.msg, "GPU-I:01 GPU-CI:00") != NULL);
    assert_int_equal(c.v[1].meta.gpu_instance, 2);
    assert_int_equal(c.v[1].meta.compute_instance, -1);
    assert_int_equal(c.v[2].meta.gpu_instance, -1);
    assert_string_equal(c.v[2].sig.process, "ray::WorkerDict");
    assert_string_equal(c.v[3].sig.process, "KMS thread");
    assert_int_equal(c.v[3].sig.pid, 77);
    assert_string_equal(c.v[4].sig.pci, "0000:3b:00.0");
    assert_false(c.v[4].sig.has_pid);
    /* Xid 79 is an xid, not an extra gpu_lost */
    assert_int_equal(c.v[5].sig.kind, GH_KIND_XID);
    assert_int_equal(c.v[5].sig.code, 79);
    assert_int_equal(count_kind(&c, GH_KIND_GPU_LOST), 0);
    coll_free(&c);
}

/* ---- SXid continuation lines ------------------------------------------------ */

static void test_sxid_folding(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    feed_str(&c,
             "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up\n"
             "[6781753.404587] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up\n"
             "[6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00\n"
             "[6781753.406566] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000}\n"
             "[6781753.407899] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up\n"
             "[6781753.408138] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 62 LTSSM Fault Up\n"
             "[6781753.409504] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 37 Sub-engine instance 00\n"
             "[6781753.409792] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 62 Sub-engine instance 00\n");
    /* open events wait for continuation lines until flush */
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 5);
    const struct rec *r = find_sig(&c, GH_KIND_SXID, "Link 63");
    assert_int_equal(r->meta.folded, 1);
    assert_string_equal(r->sig.msg,
                        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up\n"
                        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000}");
    assert_int_equal(r->sig.ts_ns, BOOT_NS + 6781753404587000LL);
    assert_string_equal(r->sig.switch_id, "nvidia-nvswitch0");
    assert_string_equal(r->sig.pci, "0000:05:00.0");
    r = find_sig(&c, GH_KIND_SXID, "Link 37");
    assert_int_equal(r->meta.folded, 1);
    assert_true(strstr(r->sig.msg, "Engine instance 37") != NULL);
    r = find_sig(&c, GH_KIND_SXID, "Link 62");
    assert_true(strstr(r->sig.msg, "Engine instance 62") != NULL);
    r = find_sig(&c, GH_KIND_SXID, "Engine instance 60");   /* no open event: alone */
    assert_int_equal(r->meta.folded, 0);
    assert_string_equal(r->sig.switch_id, "nvidia-nvswitch2");
    r = find_sig(&c, GH_KIND_SXID, "Link 48");
    assert_int_equal(r->meta.folded, 0);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.folded, 3);
    assert_int_equal(st.sxid_lines, 8);
    coll_free(&c);

    /* a continuation too far behind its event stands alone */
    coll_std(&c);
    feed_str(&c, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED\n");
    for (int i = 0; i < GH_KMSG_FOLD_LINES + 2; i++)
        feed_str(&c, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01\n");
    feed_str(&c, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[0] = 0x0\n");
    assert_int_equal(c.n, 2);   /* the first expired, the second is emitted at once */
    assert_int_equal(c.v[0].meta.folded, 0);
    assert_true(strstr(c.v[1].sig.msg, "data[0]") != NULL);
    /* a new event of the same switch closes the open one */
    feed_str(&c, "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED\n"
                 "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[0] = 0x0\n"
                 "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[1] = 0x1\n"
                 "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error\n");
    assert_int_equal(c.n, 3);
    assert_int_equal(c.v[2].meta.folded, 2);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 4);
    assert_int_equal(c.v[3].sig.code, 26008);
    coll_free(&c);
}

/* ---- GPU lost forms ------------------------------------------------------------- */

static void test_gpu_lost(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    feed_str(&c,
             "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
             "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
             "               NVRM: fallen off the bus and is not responding to commands.\n"
             "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
             "3,99,1843308145,-;NVRM: The NVIDIA GPU 0000:18:00.0\\x0aNVRM: (PCI ID: 10de:2901) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.\n"
             "NVRM: GPU 18:00.0: GPU has fallen off the bus.\n"
             "NVRM: fallen off the bus and is not responding to commands.\n"
             "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b80)\n"
             "NVRM: installed in this system is not supported by the\n");
    assert_int_equal(c.n, 4);
    assert_int_equal(c.v[0].sig.kind, GH_KIND_GPU_LOST);
    assert_string_equal(c.v[0].sig.pci, "0000:b3:00.0");
    assert_int_equal(c.v[0].sig.ts_ns, BOOT_NS + 1843308145000LL);
    assert_true(strstr(c.v[0].sig.msg, "(PCI ID: 10de:26b5)") != NULL);
    assert_string_equal(c.v[1].sig.pci, "0000:18:00.0");
    assert_int_equal(c.v[1].meta.seq, 99);
    assert_string_equal(c.v[2].sig.pci, "0000:18:00.0");
    assert_int_equal(c.v[2].meta.label.other, GH_KMSG_O_GPU_FALLEN_OFF_BUS);
    /* a lone last line: node-level loss */
    assert_null(c.v[3].sig.pci);
    coll_free(&c);
}

/* Inputs an outside harness feeds: a byte order mark before the first
 * stamp, syslog stamps in other locales, the older drivers' one-line GPU
 * loss, and counter signals counted per device. */
static void test_outside_inputs(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    feed_str(&c,
             "\xEF\xBB\xBF[ 1108.858286] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, x\n"
             "jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5: PCIe Bus Error: "
             "severity=Corrected, type=Physical Layer, id=00e5(Receiver ID)\n"
             "\xE5\x8D\x81\xE4\xB8\x80\xE6\x9C\x88 15 14:15:47 leon kernel: pcieport 0000:00:1c.5:"
             "    [ 0] Receiver Error\n"
             "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n"
             "NVRM: GPU at 0000:01:00: GPU-009fc6be-db2e-11be-ceae-9ba664de1bac\n"
             "pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer\n"
             "pcieport 0000:00:1c.4: PCIe Bus Error: severity=Corrected, type=Physical Layer\n"
             "pcieport 0000:00:1c.5: PCIe Bus Error: severity=Corrected, type=Physical Layer\n"
             "[ 2.0] \xEF\xBB\xBFNVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, x\n");
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 7);
    /* the BOM is no part of the stamp: boot time + 1108.858286 s */
    assert_int_equal(c.v[0].sig.ts_ns, BOOT_NS + 1108858286000LL);
    assert_int_equal(c.v[0].meta.stamp, GH_KMSG_STAMP_BOOT);
    /* a month we cannot read: no wall stamp, the time of reading */
    assert_int_equal(c.v[1].sig.kind, GH_KIND_PCIE);
    assert_int_equal(c.v[1].sig.ts_ns, NOW_NS);
    assert_int_equal(c.v[1].meta.stamp, GH_KMSG_STAMP_NONE);
    assert_string_equal(c.v[1].sig.pci, "0000:00:1c.5");
    /* (the detail line behind the CJK stamp emits nothing; its label is
     * checked by the H10 group of kmsg-corpus-extra2.txt) */
    assert_int_equal(c.v[2].sig.kind, GH_KIND_GPU_LOST);
    assert_string_equal(c.v[2].sig.pci, "0000:01:00.0");
    assert_int_equal(c.v[2].meta.label.other, GH_KMSG_O_GPU_FALLEN_OFF_BUS);
    /* a cumulative count per device and counter */
    assert_true(c.v[1].sig.has_count);
    assert_int_equal(c.v[1].sig.count, 1);
    assert_int_equal(c.v[3].sig.count, 2);
    assert_string_equal(c.v[4].sig.pci, "0000:00:1c.4");
    assert_int_equal(c.v[4].sig.count, 1);
    assert_int_equal(c.v[5].sig.count, 3);
    assert_false(c.v[0].sig.has_count);
    /* a BOM inside the input is just bytes (it breaks the stamp, not the Xid) */
    assert_int_equal(c.v[6].sig.kind, GH_KIND_XID);
    assert_int_equal(c.v[6].sig.code, 13);
    coll_free(&c);
}

/* ---- rejects ------------------------------------------------------------------- */

static void test_rejects(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    feed_str(&c, "NVRM: Xid error: xyz, invalid data\n"
                 "noise line\n"
                 "4,1227,437812449932,c;NVRM: Xid PCI:0000:01:00: 43, pid=1814139, name=x, Ch 00000018\n"
                 "NVRM: Xid (PCI:0000:01:00): 43x, Ch 0\n"
                 "nvidia-nvswitch0: SXid (PCI:0000:00:00.0): xyz, Fatal error\n"
                 "NVRM: Xid (PCI:0000:01:00\n"
                 "gpud[1]: looking for SXid and Xid lines\n"
                 "kernel: NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)\n");
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].sig.code, 145);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.rejected, 5);
    struct gh_kmsg_reject r[GH_KMSG_REJECTS_KEEP];
    size_t n = gh_kmsg_parser_rejects(c.p, r, GH_KMSG_REJECTS_KEEP);
    assert_int_equal(n, 5);
    assert_string_equal(r[0].reason, "xid: no '(' after 'Xid'");
    assert_int_equal(r[0].line_no, 1);
    assert_string_equal(r[0].line, "NVRM: Xid error: xyz, invalid data");
    assert_int_equal(r[1].line_no, 3);
    assert_string_equal(r[2].reason, "xid: code is not a decimal number");
    assert_true(strncmp(r[3].reason, "sxid:", 5) == 0);
    assert_string_equal(r[4].reason, "xid: unterminated '(' device field");
    /* only the newest are kept, oldest first */
    for (int i = 0; i < 40; i++) {
        char line[64];
        snprintf(line, sizeof line, "NVRM: Xid #%d\n", i);
        feed_str(&c, line);
    }
    n = gh_kmsg_parser_rejects(c.p, r, GH_KMSG_REJECTS_KEEP);
    assert_int_equal(n, GH_KMSG_REJECTS_KEEP);
    assert_string_equal(r[GH_KMSG_REJECTS_KEEP - 1].line, "NVRM: Xid #39");
    assert_string_equal(r[0].line, "NVRM: Xid #24");
    n = gh_kmsg_parser_rejects(c.p, r, 2);
    assert_int_equal(n, 2);
    assert_string_equal(r[1].line, "NVRM: Xid #39");
    coll_free(&c);
}

/* ---- partial lines and odd input -------------------------------------------------- */

static void test_partial_lines(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    /* split inside the anchor, then inside the code, CRLF ending */
    feed_str(&c, "[ 1.0] eth0: up\n[ 2.0] NV");
    assert_int_equal(c.n, 0);
    feed_str(&c, "RM: Xid (PCI:0000:01:00): 4");
    feed_str(&c, "3, pid=1, name=a, Ch 1\r");
    assert_int_equal(c.n, 0);
    feed_str(&c, "\nno newline at the end: NVRM: Xid (PCI:0000:02:00): 13, x");
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].sig.code, 43);
    assert_string_equal(c.v[0].sig.msg, "NVRM: Xid (PCI:0000:01:00): 43, pid=1, name=a, Ch 1");
    assert_int_equal(c.v[0].sig.ts_ns, BOOT_NS + 2 * GH_NS_PER_S);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.v[1].sig.code, 13);
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.lines, 3);
    /* empty feeds and empty lines */
    assert_int_equal(gh_kmsg_parser_feed(c.p, "", 0, NULL), GH_OK);
    feed_str(&c, "\n\n\n");
    gh_kmsg_parser_stats(c.p, &st);
    assert_int_equal(st.lines, 6);
    coll_free(&c);
}

static void test_long_lines(void **state)
{
    (void)state;
    size_t big = GH_KMSG_LINE_MAX * 3;
    char *buf = malloc(2 * big + 64);
    assert_non_null(buf);
    /* line 1: an Xid with a huge tail; line 2: an Xid beyond the limit */
    const char *x = "NVRM: Xid (PCI:0000:01:00): 31, ";
    size_t k = 0;
    memcpy(buf, x, strlen(x));
    k = strlen(x);
    memset(buf + k, 'a', big - k);
    k = big;
    buf[k++] = '\n';
    memset(buf + k, 'b', GH_KMSG_LINE_MAX);
    k += GH_KMSG_LINE_MAX;
    memcpy(buf + k, x, strlen(x));
    k += strlen(x);
    buf[k++] = '\n';
    const size_t whole[] = {0}, small[] = {1000};
    for (int pass = 0; pass < 2; pass++) {
        struct coll c;
        coll_std(&c);
        size_t off = 0;
        while (off < k) {
            size_t n = pass ? small[0] : k;
            if (n > k - off)
                n = k - off;
            assert_int_equal(gh_kmsg_parser_feed(c.p, buf + off, n, NULL), GH_OK);
            off += n;
        }
        (void)whole;
        assert_int_equal(c.n, 1);
        assert_int_equal(c.v[0].sig.code, 31);
        assert_true(strlen(c.v[0].sig.msg) <= GH_KMSG_LINE_MAX);
        struct gh_kmsg_stats st;
        gh_kmsg_parser_stats(c.p, &st);
        assert_int_equal(st.truncated, 2);
        assert_int_equal(st.lines, 2);
        coll_free(&c);
    }
    free(buf);
}

/* Arbitrary bytes (NULs, high bytes, stray brackets) never crash and never match. */
static void test_binary_noise(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    char buf[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245 + 12345;
        buf[i] = (char)(x >> 16);
    }
    assert_int_equal(gh_kmsg_parser_feed(c.p, buf, sizeof buf, NULL), GH_OK);
    const char odd[] = "[\n[ \n[]\n<\n<1>\n1,2,3\n1,2,3,\n1,2,3,;\n[Sun\nNov 29\nNVRM:\nNVRM: Xid\n"
                       "SXid\nSXid (\nnvidia-nvswitch0: SXid\nAER:\nPCIe Bus Error: severity=\n"
                       "NVRM: GPU at PCI:\nNVRM: The NVIDIA GPU \n";
    assert_int_equal(gh_kmsg_parser_feed(c.p, odd, sizeof odd - 1, NULL), GH_OK);
    assert_int_equal(gh_kmsg_parser_flush(c.p, NULL), GH_OK);
    coll_free(&c);
}

/* ---- API odds and ends --------------------------------------------------------------- */

static void test_emit_error(void **state)
{
    (void)state;
    struct coll c;
    coll_std(&c);
    c.fail_with = GH_EIO;
    struct gh_err err = {{0}};
    const char *t = "NVRM: Xid (PCI:0000:01:00): 31, a\nNVRM: Xid (PCI:0000:01:00): 32, b\npart";
    assert_int_equal(gh_kmsg_parser_feed(c.p, t, strlen(t), &err), GH_EIO);
    assert_true(strstr(err.msg, "emit") != NULL);
    /* the parser stays usable, the partial line was dropped */
    c.fail_with = 0;
    feed_str(&c, "NVRM: Xid (PCI:0000:01:00): 33, c\n");
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].sig.code, 33);
    coll_free(&c);
}

static void test_no_emit_and_defaults(void **state)
{
    (void)state;
    struct gh_kmsg_parser *p = NULL;
    assert_int_equal(gh_kmsg_parser_new(&p, NULL, NULL), GH_OK);
    struct gh_kmsg_label l;
    const char *t = "NVRM: Xid (PCI:0000:01:00): 31, a";
    assert_int_equal(gh_kmsg_parser_line(p, t, strlen(t), &l, NULL), GH_OK);
    assert_int_equal(l.cls, GH_KMSG_XID);
    assert_int_equal(l.code, 31);
    assert_null(gh_kmsg_parser_meta(p));
    struct gh_kmsg_stats st;
    gh_kmsg_parser_stats(p, &st);
    assert_int_equal(st.signals, 1);
    gh_kmsg_parser_free(p);
    gh_kmsg_parser_free(NULL);
}

static void test_labels_and_pci(void **state)
{
    (void)state;
    char b[GH_KMSG_LABEL_MAX];
    struct gh_kmsg_label l = {GH_KMSG_XID, 79, GH_KMSG_O_NONE}, back;
    assert_string_equal(gh_kmsg_label_format(&l, b, sizeof b), "MATCH xid=79");
    l = (struct gh_kmsg_label){GH_KMSG_SXID, 20034, GH_KMSG_O_NONE};
    assert_string_equal(gh_kmsg_label_format(&l, b, sizeof b), "MATCH sxid=20034");
    l = (struct gh_kmsg_label){GH_KMSG_NOMATCH, 0, GH_KMSG_O_NONE};
    assert_string_equal(gh_kmsg_label_format(&l, b, sizeof b), "NOMATCH");
    for (int o = 1; o < GH_KMSG_O__COUNT; o++) {
        l = (struct gh_kmsg_label){GH_KMSG_OTHER, 0, (enum gh_kmsg_other)o};
        gh_kmsg_label_format(&l, b, sizeof b);
        assert_int_equal(gh_kmsg_label_parse(b, strlen(b), &back), GH_OK);
        assert_true(label_eq(&l, &back));
        assert_int_equal(gh_kmsg_other_from_name(gh_kmsg_other_name((enum gh_kmsg_other)o)), o);
    }
    assert_string_equal(gh_kmsg_other_name(GH_KMSG_O_PCIE_AER), "pcie_aer");
    assert_int_equal(gh_kmsg_other_from_name("nope"), -1);
    assert_int_equal(gh_kmsg_label_parse("MATCH xid=", 10, &back), GH_EINVAL);
    assert_int_equal(gh_kmsg_label_parse("MATCH other=nope", 16, &back), GH_EINVAL);
    assert_int_equal(gh_kmsg_label_parse("match xid=1", 11, &back), GH_EINVAL);

}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_labels),
        cmocka_unit_test(test_extra_labels),
        cmocka_unit_test(test_real_corpus_labels),
        cmocka_unit_test(test_real_corpus2_labels),
        cmocka_unit_test(test_chunking_invariance),
        cmocka_unit_test(test_sample_signals),
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_seq_and_id),
        cmocka_unit_test(test_mig_and_fields),
        cmocka_unit_test(test_sxid_folding),
        cmocka_unit_test(test_gpu_lost),
        cmocka_unit_test(test_outside_inputs),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_partial_lines),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test(test_binary_noise),
        cmocka_unit_test(test_emit_error),
        cmocka_unit_test(test_no_emit_and_defaults),
        cmocka_unit_test(test_labels_and_pci),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
