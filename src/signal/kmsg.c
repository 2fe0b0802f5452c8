/* kmsg.c - the kernel-log parser: finds the few GPU, NVSwitch, PCIe and NIC
 * lines in kernel-log text, labels every line and turns the faults into
 * signals (the contract is in kmsg.h).
 *
 * Speed comes from never looking at a noise line twice. feed() walks the
 * buffer 16 bytes at a time looking for two-byte "triggers" (the rare first
 * bytes of "NVRM", "SXid", "AER:", "PCIe Bus Error", "mlx5_", "segfault",
 * "nvidia-peermem") while counting newlines; only a line holding a verified
 * trigger, or the line after a PCIe AER line (whose detail lines carry no
 * keyword), goes through the slow path that parses wrappers, stamps and
 * fields. Noise costs no allocation and no per-line call.
 *
 * Every path that decides a line's fate runs the same predicate
 * (trigger || AER context || on_line), so the emitted signals do not depend
 * on how the input was chunked; the fuzz target checks exactly that. The
 * scanner and the matchers therefore stay together in this file; what is
 * before the message on a line (record prefixes, syslog/journald headers
 * and their time stamps) is decoded by kmsg_wrap.c and kmsg_stamp.c, and
 * the labels' text form is kmsg_label.c's. */
#include "signal/kmsg.h"
#include "common/pci.h"
#include "signal/kmsg_text.h"
#include "signal/kmsg_wrap.h"
#include "signal/signal_json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define GH_KMSG_SSE2 1
#endif

#define MSG_MAX 4096      /* a signal's msg, folded lines included */
#define SX_OPEN_MAX 8     /* SXid events open for continuation lines */
#define PROBE_LINES 4     /* the "fallen off the bus" probe group spans this */
#define UUID_LEN 96
#define PCI_LEN 24
#define SWITCH_LEN 40

/* ------------------------------------------------------------- the parser */

struct sx_open {
    bool used;
    uint64_t line_no;
    int code;
    char sw[SWITCH_LEN];
    char pci[PCI_LEN];
    size_t msg_len;
    struct gh_signal sig;   /* owns its strings */
    struct gh_kmsg_meta meta;
};

struct uuid_ent {
    uint64_t age;
    char pci[PCI_LEN];
    char uuid[UUID_LEN];
};

/* Lines seen so far for one device and counter (pcie, nic, nvlink kinds). */
struct occ_ent {
    uint64_t age;
    int64_t n;
    const char *counter;    /* a string literal of this file */
    char pci[PCI_LEN];
};
#define OCC_MAX GH_KMSG_OCC_MAX

struct gh_kmsg_parser {
    char *node, *boot_id;
    int64_t boot_ns;
    int default_year;
    int32_t tz_s;
    const struct gh_clock *clock;
    gh_kmsg_emit_fn emit;
    void *emit_ctx;
    gh_kmsg_line_fn on_line;
    void *line_ctx;

    char *part;             /* kept partial line, GH_KMSG_LINE_MAX bytes */
    size_t part_len;        /* bytes kept */
    size_t part_raw;        /* bytes seen, kept or not */

    uint64_t line_no;
    struct gh_kmsg_stats st;
    struct gh_kmsg_reject rej[GH_KMSG_REJECTS_KEEP];
    size_t rej_next, rej_n;

    struct uuid_ent uuid[GH_KMSG_UUID_MAX];
    size_t uuid_n;
    uint64_t uuid_age;

    struct sx_open sx[SX_OPEN_MAX];

    struct occ_ent occ[OCC_MAX];
    size_t occ_n;
    uint64_t occ_age;

    /* "The NVIDIA GPU <bdf>" seen, waiting for "fallen off the bus" */
    bool pr_open;
    uint64_t pr_line;
    char pr_pci[PCI_LEN];
    int64_t pr_ts;
    struct gh_kmsg_meta pr_meta;
    char pr_msg[MSG_MAX];
    size_t pr_msg_len;

    int aer_ctx;            /* 0, or the class of the last AER line */
    int aer_prev;           /* aer_ctx as it was before the current line */

    bool has_last_seq;
    uint64_t last_seq;

    const struct gh_kmsg_meta *cur_meta;
    struct gh_signal tmp;
};

enum { AER_NONE = 0, AER_UNC = 1, AER_CORR = 2 };

void gh_kmsg_opts_init(struct gh_kmsg_opts *o)
{
    memset(o, 0, sizeof *o);
    o->boot_time_ns = GH_KMSG_BOOT_UNKNOWN;
}

static char *dup_bounded(const char *s, size_t max)
{
    if (!s)
        return NULL;
    size_t n = strnlen(s, max);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

int gh_kmsg_parser_new(struct gh_kmsg_parser **out, const struct gh_kmsg_opts *opts,
                       struct gh_err *err)
{
    struct gh_kmsg_opts def;
    if (!opts) {
        gh_kmsg_opts_init(&def);
        opts = &def;
    }
    *out = NULL;
    struct gh_kmsg_parser *p = calloc(1, sizeof *p);
    if (!p)
        return gh_err_set(err, GH_ENOMEM, "kmsg parser: out of memory");
    p->part = malloc(GH_KMSG_LINE_MAX);
    p->node = dup_bounded(opts->node, 128);
    p->boot_id = dup_bounded(opts->boot_id, 128);
    if (!p->part || (opts->node && !p->node) || (opts->boot_id && !p->boot_id)) {
        gh_kmsg_parser_free(p);
        return gh_err_set(err, GH_ENOMEM, "kmsg parser: out of memory");
    }
    p->boot_ns = opts->boot_time_ns;
    p->default_year = opts->default_year;
    p->tz_s = opts->tz_offset_s;
    p->clock = opts->clock ? opts->clock : gh_clock_real();
    p->emit = opts->emit;
    p->emit_ctx = opts->emit_ctx;
    p->on_line = opts->on_line;
    p->line_ctx = opts->line_ctx;
    gh_signal_init(&p->tmp);
    for (size_t i = 0; i < SX_OPEN_MAX; i++)
        gh_signal_init(&p->sx[i].sig);
    *out = p;
    return GH_OK;
}

void gh_kmsg_parser_free(struct gh_kmsg_parser *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < SX_OPEN_MAX; i++)
        gh_signal_clear(&p->sx[i].sig);
    gh_signal_clear(&p->tmp);
    free(p->part);
    free(p->node);
    free(p->boot_id);
    free(p);
}

/* --------------------------------------------------------- small helpers */

static bool starts(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && memcmp(s, lit, k) == 0;
}

static const char *find(const char *s, size_t n, const char *lit)
{
    return memmem(s, n, lit, strlen(lit));
}

/* Parses a PCI address at s (gh_pci_scan) into its canonical form in
 * out[PCI_LEN] and the bytes used into *used. */
static bool parse_bdf(const char *s, size_t n, bool allow_short, char *out, size_t *used)
{
    struct gh_pci a;
    if (!gh_pci_scan(s, n, allow_short, &a, used))
        return false;
    gh_pci_format(&a, out, PCI_LEN);
    return true;
}

/* The first PCI address (with domain) in s, normalised. */
static bool first_bdf(const char *s, size_t n, char *out)
{
    for (size_t i = 0; i + 7 <= n; i++) {
        if (!isxdigit((unsigned char)s[i]) || (i > 0 && isalnum((unsigned char)s[i - 1])))
            continue;
        if (parse_bdf(s + i, n - i, false, out, NULL))
            return true;
    }
    return false;
}

static void trim_end(const char *s, size_t *n)
{
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t' || s[*n - 1] == '\r'))
        (*n)--;
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 when there is none.
 * NUL counts as invalid: the text goes into C strings. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    return s[0] ? gh_utf8_seq((const char *)s, n) : 0;
}

/* Length of the run of ASCII bytes other than NUL at s[0..n), eight bytes
 * at a time. */
static size_t ascii_run(const char *s, size_t n)
{
    const uint64_t hi = 0x8080808080808080ULL, lo = 0x0101010101010101ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        if ((v & hi) || ((v - lo) & ~v & hi))
            break;
    }
    while (i < n && s[i] && !(s[i] & 0x80))
        i++;
    return i;
}

/* Copies s[0..n) into out (cap bytes, NUL added) as valid UTF-8: each byte
 * that starts no valid sequence (a NUL, a stray continuation byte, an
 * overlong form) becomes U+FFFD. Stops before a sequence that would not fit;
 * returns the bytes written. Kernel lines are not guaranteed to be UTF-8
 * (process names, firmware strings), signals must be. */
static size_t utf8_clean(char *out, size_t cap, const char *s, size_t n)
{
    static const char repl[] = "\xEF\xBF\xBD";
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n;) {
        size_t r = ascii_run(s + i, n - i);
        if (r) {
            if (o + r >= cap)
                r = cap - 1 - o;
            memcpy(out + o, s + i, r);
            o += r, i += r;
            if (o + 1 >= cap)
                break;
            continue;
        }
        size_t k = utf8_seq(u + i, n - i);
        const char *src = k ? s + i : repl;
        size_t w = k ? k : 3;
        if (o + w >= cap)
            break;
        memcpy(out + o, src, w);
        o += w;
        i += k ? k : 1;
    }
    out[o] = '\0';
    return o;
}

/* gh_signal_set_str() of s[0..n) made valid UTF-8, at most MSG_MAX bytes. */
static int set_text(char **field, const char *s, size_t n)
{
    if (n <= MSG_MAX && ascii_run(s, n) == n)     /* the common case: no copy */
        return gh_signal_set_str(field, s, n);
    char buf[MSG_MAX + 1];
    size_t k = utf8_clean(buf, sizeof buf, s, n);
    return gh_signal_set_str(field, buf, k);
}

/* "Now" on the parser's clock: the stamp of a line that has none. */
static int64_t clock_now(const struct gh_kmsg_parser *p)
{
    return gh_clock_now(p->clock);
}

/* ------------------------------------------------------------ emission */

static int emit_signal(struct gh_kmsg_parser *p, struct gh_signal *s,
                       const struct gh_kmsg_meta *m, struct gh_err *err)
{
    int rc;
    s->source = GH_SRC_KMSG;
    if (p->node && !s->node && (rc = gh_signal_set_str(&s->node, p->node, strlen(p->node))))
        goto oom;
    /* The driver names a GPU by PCI address; attach the UUID it announced for
     * that address ("NVRM: GPU at PCI:...: GPU-<uuid>"), which survives
     * re-enumeration and is what NVML and DCGM report. */
    const char *uuid = s->uuid ? NULL : gh_kmsg_parser_uuid(p, s->pci);
    if (uuid && (rc = gh_signal_set_str(&s->uuid, uuid, strlen(uuid))))
        goto oom;
    if (p->boot_id && m->has_seq && !s->id) {
        char id[320];
        int k = snprintf(id, sizeof id, "%s/%s/%llu", p->node ? p->node : "", p->boot_id,
                         (unsigned long long)m->seq);
        if (k > 0 && (rc = gh_signal_set_str(&s->id, id, strlen(id))))
            goto oom;
        s->kmsg_seq = m->seq;
        s->has_kmsg_seq = true;
    }
    if (p->emit) {
        p->cur_meta = m;
        rc = p->emit(p->emit_ctx, s);
        p->cur_meta = NULL;
        if (rc)
            return gh_err_set(err, rc, "kmsg parser: emit callback returned %d", rc);
    }
    p->st.signals++;
    return GH_OK;
oom:
    return gh_err_set(err, GH_ENOMEM, "kmsg parser: out of memory");
}

static void sx_close(struct sx_open *o)
{
    gh_signal_clear(&o->sig);
    o->used = false;
}

static int sx_emit(struct gh_kmsg_parser *p, struct sx_open *o, struct gh_err *err)
{
    int rc = emit_signal(p, &o->sig, &o->meta, err);
    sx_close(o);
    return rc;
}

/* Emits open SXid events, oldest first: all of them, or those older than
 * GH_KMSG_FOLD_LINES lines. */
static int sx_expire(struct gh_kmsg_parser *p, bool all, struct gh_err *err)
{
    for (;;) {
        struct sx_open *oldest = NULL;
        for (size_t i = 0; i < SX_OPEN_MAX; i++) {
            struct sx_open *o = &p->sx[i];
            if (!o->used || (!all && p->line_no - o->line_no <= GH_KMSG_FOLD_LINES))
                continue;
            if (!oldest || o->line_no < oldest->line_no)
                oldest = o;
        }
        if (!oldest)
            return GH_OK;
        int rc = sx_emit(p, oldest, err);
        if (rc)
            return rc;
    }
}

/* ------------------------------------------------------------ triggers */

struct trig {
    char c0, c1;
    unsigned char off;
    const char *anchor;
};

/* The pair is two rare adjacent bytes of the anchor, at offset off. */
static const struct trig trigs[] = {
    {'V', 'R', 1, "NVRM"},
    {'S', 'X', 0, "SXid"},
    {'A', 'E', 0, "AER:"},
    {'I', 'e', 2, "PCIe Bus Error"},
    {'x', '5', 2, "mlx5_"},
    {'g', 'f', 2, "segfault"},
    {'-', 'p', 6, "nvidia-peermem"},
};
#define NTRIGS (sizeof trigs / sizeof trigs[0])

/* Is there an anchor whose pair sits at t? lo..e bound the bytes readable. */
static bool verify_at(const char *lo, const char *t, const char *e)
{
    for (size_t k = 0; k < NTRIGS; k++) {
        if (t[0] != trigs[k].c0 || t + 1 >= e || t[1] != trigs[k].c1)
            continue;
        const char *a = t - trigs[k].off;
        size_t al = strlen(trigs[k].anchor);
        if (a >= lo && (size_t)(e - a) >= al && memcmp(a, trigs[k].anchor, al) == 0)
            return true;
    }
    return false;
}

static inline bool pair_at(const char *t)
{
    switch (t[0]) {
    case 'V': return t[1] == 'R';
    case 'S': return t[1] == 'X';
    case 'A': return t[1] == 'E';
    case 'I': return t[1] == 'e';
    case 'x': return t[1] == '5';
    case 'g': return t[1] == 'f';
    case '-': return t[1] == 'p';
    default: return false;
    }
}

#ifdef GH_KMSG_SSE2
static inline unsigned pair_mask(const char *q)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)q);
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(q + 1));
#define PAIR(x, y) _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8(x)), _mm_cmpeq_epi8(b, _mm_set1_epi8(y)))
    __m128i m = _mm_or_si128(PAIR('V', 'R'), PAIR('S', 'X'));
    m = _mm_or_si128(m, PAIR('A', 'E'));
    m = _mm_or_si128(m, PAIR('I', 'e'));
    m = _mm_or_si128(m, PAIR('x', '5'));
    m = _mm_or_si128(m, PAIR('g', 'f'));
    m = _mm_or_si128(m, PAIR('-', 'p'));
#undef PAIR
    return (unsigned)_mm_movemask_epi8(m);
}

static inline unsigned nl_mask(const char *q)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)q);
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, _mm_set1_epi8('\n')));
}
#endif

/* Does the line [s, s+n) hold a trigger? */
static bool has_trigger(const char *s, size_t n)
{
    const char *e = s + n, *q = s;
#ifdef GH_KMSG_SSE2
    for (; q + 17 <= e; q += 16) {
        unsigned m = pair_mask(q);
        while (m) {
            if (verify_at(s, q + __builtin_ctz(m), e))
                return true;
            m &= m - 1;
        }
    }
#endif
    for (; q + 1 < e; q++)
        if (pair_at(q) && verify_at(s, q, e))
            return true;
    return false;
}

/* ---------------------------------------------------------- rejects */

static void reject(struct gh_kmsg_parser *p, const char *reason, const char *s, size_t n)
{
    struct gh_kmsg_reject *r = &p->rej[p->rej_next];
    r->reason = reason;
    r->line_no = p->line_no;
    size_t k = n < sizeof r->line - 1 ? n : sizeof r->line - 1;
    memcpy(r->line, s, k);
    r->line[k] = '\0';
    p->rej_next = (p->rej_next + 1) % GH_KMSG_REJECTS_KEEP;
    if (p->rej_n < GH_KMSG_REJECTS_KEEP)
        p->rej_n++;
    p->st.rejected++;
}

/* ---------------------------------------------------------- line parsing */

/* What one line turned out to be, before any signal is built. */
struct line_ctx {
    const char *s;
    size_t n;
    struct gh_kmsg_wrap w;
    bool wrapped;          /* w is filled */
    struct gh_kmsg_label label;
};

static void need_wrap(const struct gh_kmsg_parser *p, struct line_ctx *lc)
{
    if (!lc->wrapped) {
        struct gh_kmsg_zone z = {p->clock, p->default_year, p->tz_s};
        gh_kmsg_wrap_parse(&z, lc->s, lc->n, &lc->w);
        lc->wrapped = true;
    }
}

static void stamp_of(struct gh_kmsg_parser *p, struct line_ctx *lc, int64_t *ts,
                     struct gh_kmsg_meta *m)
{
    need_wrap(p, lc);
    if (lc->w.has_wall) {
        *ts = lc->w.wall_ns;
        m->stamp = GH_KMSG_STAMP_WALL;
    } else if (lc->w.has_mono && p->boot_ns != GH_KMSG_BOOT_UNKNOWN &&
               !__builtin_add_overflow(p->boot_ns, lc->w.mono_ns, ts)) {
        m->stamp = GH_KMSG_STAMP_BOOT;
    } else {
        *ts = clock_now(p);
        m->stamp = GH_KMSG_STAMP_NONE;
        if (lc->w.has_mono)
            p->st.unplaced++;
    }
    m->has_seq = lc->w.has_seq;
    m->seq = lc->w.seq;
}

static void meta_init(const struct gh_kmsg_parser *p, struct gh_kmsg_meta *m,
                      const struct gh_kmsg_label *l)
{
    memset(m, 0, sizeof *m);
    m->label = *l;
    m->line_no = p->line_no;
    m->gpu_instance = m->compute_instance = m->caused_by_xid = -1;
}

/* Fills the common fields of p->tmp (cleared) for the current line; msg is
 * [ms, ms+mn). */
static int tmp_begin(struct gh_kmsg_parser *p, struct line_ctx *lc, enum gh_kind kind,
                     const char *ms, size_t mn, struct gh_kmsg_meta *m)
{
    gh_signal_clear(&p->tmp);
    p->tmp.kind = kind;
    meta_init(p, m, &lc->label);
    stamp_of(p, lc, &p->tmp.ts_ns, m);
    trim_end(ms, &mn);
    return set_text(&p->tmp.msg, ms, mn);
}

static int set_cstr(char **f, const char *v)
{
    return v && *v ? gh_signal_set_str(f, v, strlen(v)) : GH_OK;
}

static int oom(struct gh_err *err)
{
    return gh_err_set(err, GH_ENOMEM, "kmsg parser: out of memory");
}

enum { R_NONE = 0, R_MATCH = 1, R_REJECT = 2 };

/* "NVRM: Xid (PCI:dddd:bb:dd[ GPU-I:NN][ GPU-CI:NN]): code, [pid=P, name=N, ]text" */
static int do_xid(struct gh_kmsg_parser *p, struct line_ctx *lc, size_t a, size_t i,
                  struct gh_err *err, int *res)
{
    const char *s = lc->s;
    size_t n = lc->n;
    *res = R_REJECT;
    i = gh_kmsg_skip_sp(s, n, i);
    if (i >= n || s[i] != '(') {
        reject(p, "xid: no '(' after 'Xid'", s, n);
        return GH_OK;
    }
    const char *close = memchr(s + i, ')', n - i);
    if (!close) {
        reject(p, "xid: unterminated '(' device field", s, n);
        return GH_OK;
    }
    size_t ds = i + 1, de = (size_t)(close - s);
    size_t j = de + 1;
    if (j >= n || s[j] != ':') {
        reject(p, "xid: no ':' after the device field", s, n);
        return GH_OK;
    }
    j = gh_kmsg_skip_sp(s, n, j + 1);
    long long code;
    size_t u;
    if (!gh_kmsg_uint(s + j, n - j, 10, &code, &u)) {
        reject(p, "xid: code is not a decimal number", s, n);
        return GH_OK;
    }
    if (u > 9 || (j + u < n && s[j + u] != ',' && s[j + u] != ' ')) {
        reject(p, "xid: code is not a decimal number", s, n);
        return GH_OK;
    }
    *res = R_MATCH;
    lc->label.cls = GH_KMSG_XID;
    lc->label.code = (int)code;

    struct gh_kmsg_meta m;
    int rc = tmp_begin(p, lc, GH_KIND_XID, s + a, n - a, &m);
    if (rc)
        return oom(err);
    p->tmp.code = (int)code;
    /* device field */
    char pci[PCI_LEN];
    size_t k = gh_kmsg_skip_sp(s, de, ds);
    if (de - k >= 4 && strncasecmp(s + k, "PCI:", 4) == 0)
        k += 4;
    if (parse_bdf(s + k, de - k, true, pci, NULL) && (rc = set_cstr(&p->tmp.pci, pci)))
        return oom(err);
    const char *g = find(s + ds, de - ds, "GPU-I:");
    long long v;
    if (g && gh_kmsg_uint(g + 6, (size_t)(s + de - g - 6), 4, &v, NULL))
        m.gpu_instance = (int)v;
    g = find(s + ds, de - ds, "GPU-CI:");
    if (g && gh_kmsg_uint(g + 7, (size_t)(s + de - g - 7), 4, &v, NULL))
        m.compute_instance = (int)v;
    /* pid=, name= */
    j += u;
    if (j < n && s[j] == ',')
        j++;
    j = gh_kmsg_skip_sp(s, n, j);
    if (starts(s + j, n - j, "pid=")) {
        j += 4;
        const char *c = find(s + j, n - j, ", ");
        size_t ve = c ? (size_t)(c - s) : n;
        long long pid;
        if (gh_kmsg_uint(s + j, ve - j, 18, &pid, &u) && j + u == ve) {
            p->tmp.has_pid = true;
            p->tmp.pid = pid;
        }
        j = c ? ve + 2 : n;
        j = gh_kmsg_skip_sp(s, n, j);
    }
    if (starts(s + j, n - j, "name=")) {
        j += 5;
        const char *c = find(s + j, n - j, ", ");
        size_t ve = c ? (size_t)(c - s) : n;
        size_t vn = ve - j;
        trim_end(s + j, &vn);
        if (vn > 0 && !(vn == 9 && memcmp(s + j, "<unknown>", 9) == 0) &&
            (rc = set_text(&p->tmp.process, s + j, vn)))
            return oom(err);
    }
    const char *cb = find(s + j, n - j, "caused by previous Xid ");
    if (cb && gh_kmsg_uint(cb + 23, (size_t)(s + n - cb - 23), 9, &v, NULL))
        m.caused_by_xid = (int)v;
    return emit_signal(p, &p->tmp, &m, err);
}

static bool same_or_absent(const char *a, const char *b)
{
    return !*a || !*b || strcmp(a, b) == 0;
}

/* "nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): code, text" */
static int do_sxid(struct gh_kmsg_parser *p, struct line_ctx *lc, size_t x, struct gh_err *err,
                   int *res)
{
    const char *s = lc->s;
    size_t n = lc->n;
    /* the switch token before "SXid" */
    char sw[SWITCH_LEN] = "";
    size_t a = x;
    if (x >= 2 && s[x - 1] == ' ' && s[x - 2] == ':') {
        size_t te = x - 2, ts = te;
        while (ts > 0 && s[ts - 1] != ' ' && s[ts - 1] != '\t' && s[ts - 1] != ']' &&
               s[ts - 1] != ';')
            ts--;
        if (te > ts && te - ts < SWITCH_LEN && find(s + ts, te - ts, "nvswitch")) {
            utf8_clean(sw, sizeof sw, s + ts, te - ts);
            a = ts;
        }
    }
    size_t i = x + 4;
    bool paren = gh_kmsg_skip_sp(s, n, i) < n && s[gh_kmsg_skip_sp(s, n, i)] == '(';
    if (!sw[0] && !paren) {
        *res = R_NONE;     /* "SXid" in unrelated text */
        return GH_OK;
    }
    *res = R_REJECT;
    if (i < n && isalnum((unsigned char)s[i])) {
        reject(p, "sxid: 'SXid' is followed by a word", s, n);
        return GH_OK;
    }
    i = gh_kmsg_skip_sp(s, n, i);
    if (!paren) {
        reject(p, "sxid: no '(' after 'SXid'", s, n);
        return GH_OK;
    }
    const char *close = memchr(s + i, ')', n - i);
    if (!close) {
        reject(p, "sxid: unterminated '(' device field", s, n);
        return GH_OK;
    }
    size_t ds = i + 1, de = (size_t)(close - s), j = de + 1;
    if (j >= n || s[j] != ':') {
        reject(p, "sxid: no ':' after the device field", s, n);
        return GH_OK;
    }
    j = gh_kmsg_skip_sp(s, n, j + 1);
    long long code;
    size_t u;
    if (!gh_kmsg_uint(s + j, n - j, 10, &code, &u) || u > 9 ||
        (j + u < n && s[j + u] != ',' && s[j + u] != ' ')) {
        reject(p, "sxid: code is not a decimal number", s, n);
        return GH_OK;
    }
    *res = R_MATCH;
    lc->label.cls = GH_KMSG_SXID;
    lc->label.code = (int)code;

    char pci[PCI_LEN] = "";
    size_t k = gh_kmsg_skip_sp(s, de, ds);
    if (de - k >= 4 && strncasecmp(s + k, "PCI:", 4) == 0)
        k += 4;
    if (!parse_bdf(s + k, de - k, true, pci, NULL))
        pci[0] = '\0';
    size_t b = j + u;
    if (b < n && s[b] == ',')
        b++;
    b = gh_kmsg_skip_sp(s, n, b);
    bool cont = starts(s + b, n - b, "Data {") || starts(s + b, n - b, "Data{") ||
                starts(s + b, n - b, "Severity ");
    if (!cont) {
        const char *d = find(s + b, n - b, "data[");
        cont = d && d + 5 < s + n && isdigit((unsigned char)d[5]);
    }
    size_t mn = n - a;
    trim_end(s + a, &mn);
    if (mn > MSG_MAX)
        mn = MSG_MAX;
    int rc;
    if (cont) {
        for (size_t q = 0; q < SX_OPEN_MAX; q++) {
            struct sx_open *o = &p->sx[q];
            if (!o->used || o->code != (int)code || !(sw[0] || pci[0]) ||
                !same_or_absent(o->sw, sw) || !same_or_absent(o->pci, pci) ||
                (!(sw[0] && o->sw[0]) && !(pci[0] && o->pci[0])))
                continue;
            char add[MSG_MAX + 1];
            size_t an = utf8_clean(add, sizeof add, s + a, mn);
            if (o->msg_len + 1 + an <= MSG_MAX) {
                char *msg = malloc(o->msg_len + 1 + an + 1);
                if (!msg)
                    return oom(err);
                memcpy(msg, o->sig.msg, o->msg_len);
                msg[o->msg_len] = '\n';
                memcpy(msg + o->msg_len + 1, add, an);
                o->msg_len += 1 + an;
                msg[o->msg_len] = '\0';
                free(o->sig.msg);
                o->sig.msg = msg;
            }
            o->meta.folded++;
            p->st.folded++;
            return GH_OK;
        }
    } else {
        /* a new event closes the previous one of the same switch */
        for (size_t q = 0; q < SX_OPEN_MAX; q++) {
            struct sx_open *o = &p->sx[q];
            if (o->used && ((sw[0] && strcmp(o->sw, sw) == 0) ||
                            (!sw[0] && pci[0] && strcmp(o->pci, pci) == 0))) {
                if ((rc = sx_emit(p, o, err)))
                    return rc;
            }
        }
    }
    struct gh_kmsg_meta m;
    if ((rc = tmp_begin(p, lc, GH_KIND_SXID, s + a, mn, &m)))
        return oom(err);
    p->tmp.code = (int)code;
    if ((rc = set_cstr(&p->tmp.pci, pci)) || (rc = set_cstr(&p->tmp.switch_id, sw)))
        return oom(err);
    if (cont)    /* a continuation with no open event stands alone */
        return emit_signal(p, &p->tmp, &m, err);
    struct sx_open *slot = NULL;
    for (size_t q = 0; q < SX_OPEN_MAX && !slot; q++)
        if (!p->sx[q].used)
            slot = &p->sx[q];
    if (!slot) {
        slot = &p->sx[0];
        for (size_t q = 1; q < SX_OPEN_MAX; q++)
            if (p->sx[q].line_no < slot->line_no)
                slot = &p->sx[q];
        if ((rc = sx_emit(p, slot, err)))
            return rc;
    }
    slot->used = true;
    slot->line_no = p->line_no;
    slot->code = (int)code;
    memcpy(slot->sw, sw, sizeof sw);
    memcpy(slot->pci, pci, sizeof pci);
    slot->sig = p->tmp;           /* steal the strings */
    gh_signal_init(&p->tmp);
    slot->msg_len = strlen(slot->sig.msg);
    slot->meta = m;
    return GH_OK;
}

/* How many lines so far named this device (or none) and counter, this one
 * included: the cumulative count of spec section 1. The table is bounded; an
 * entry evicted (least recently used) starts again at 1, which readers of
 * cumulative counters take as a reset. */
static int64_t occ_count(struct gh_kmsg_parser *p, const char *pci, const char *counter)
{
    const char *key = pci ? pci : "";
    struct occ_ent *lru = NULL;
    for (size_t i = 0; i < p->occ_n; i++) {
        struct occ_ent *o = &p->occ[i];
        if (strcmp(o->counter, counter) == 0 && strcmp(o->pci, key) == 0) {
            o->age = ++p->occ_age;
            return ++o->n;
        }
        if (!lru || o->age < lru->age)
            lru = o;
    }
    struct occ_ent *o = p->occ_n < OCC_MAX ? &p->occ[p->occ_n++] : lru;
    snprintf(o->pci, sizeof o->pci, "%s", key);
    o->counter = counter;
    o->n = 1;
    o->age = ++p->occ_age;
    return 1;
}

static int emit_simple(struct gh_kmsg_parser *p, struct line_ctx *lc, enum gh_kind kind,
                       const char *ms, const char *pci, const char *counter, struct gh_err *err)
{
    struct gh_kmsg_meta m;
    if (tmp_begin(p, lc, kind, ms, (size_t)(lc->s + lc->n - ms), &m) ||
        set_cstr(&p->tmp.pci, pci) || set_cstr(&p->tmp.counter, counter))
        return oom(err);
    if (counter) {
        p->tmp.has_count = true;
        p->tmp.count = occ_count(p, pci, counter);
    }
    return emit_signal(p, &p->tmp, &m, err);
}

static void set_other(struct line_ctx *lc, enum gh_kmsg_other o)
{
    lc->label.cls = GH_KMSG_OTHER;
    lc->label.other = o;
}

static void probe_append(struct gh_kmsg_parser *p, const char *ms, size_t mn)
{
    trim_end(ms, &mn);
    if (p->pr_msg_len + 2 >= MSG_MAX)
        return;
    p->pr_msg[p->pr_msg_len++] = '\n';
    p->pr_msg_len += utf8_clean(p->pr_msg + p->pr_msg_len, MSG_MAX - p->pr_msg_len, ms, mn);
}

static int probe_emit(struct gh_kmsg_parser *p, struct line_ctx *lc, struct gh_err *err)
{
    gh_signal_clear(&p->tmp);
    p->tmp.kind = GH_KIND_GPU_LOST;
    p->tmp.ts_ns = p->pr_ts;
    struct gh_kmsg_meta m = p->pr_meta;
    m.label = lc->label;
    if (gh_signal_set_str(&p->tmp.msg, p->pr_msg, p->pr_msg_len) ||
        set_cstr(&p->tmp.pci, p->pr_pci))
        return oom(err);
    p->pr_open = false;
    return emit_signal(p, &p->tmp, &m, err);
}

static void probe_open(struct gh_kmsg_parser *p, struct line_ctx *lc, const char *pci,
                       const char *ms, size_t mn)
{
    p->pr_open = true;
    p->pr_line = p->line_no;
    memcpy(p->pr_pci, pci, PCI_LEN);
    meta_init(p, &p->pr_meta, &lc->label);
    stamp_of(p, lc, &p->pr_ts, &p->pr_meta);
    trim_end(ms, &mn);
    p->pr_msg_len = utf8_clean(p->pr_msg, MSG_MAX, ms, mn);
}

static void uuid_put(struct gh_kmsg_parser *p, const char *pci, const char *u, size_t un)
{
    if (un >= UUID_LEN)
        un = UUID_LEN - 1;
    struct uuid_ent *e = NULL;
    for (size_t i = 0; i < p->uuid_n && !e; i++)
        if (strcmp(p->uuid[i].pci, pci) == 0)
            e = &p->uuid[i];
    if (!e && p->uuid_n < GH_KMSG_UUID_MAX)
        e = &p->uuid[p->uuid_n++];
    if (!e) {
        e = &p->uuid[0];
        for (size_t i = 1; i < p->uuid_n; i++)
            if (p->uuid[i].age < e->age)
                e = &p->uuid[i];
    }
    memcpy(e->pci, pci, PCI_LEN);
    utf8_clean(e->uuid, UUID_LEN, u, un);
    e->age = ++p->uuid_age;
}

/* Lines that start with "NVRM:" (a at "NVRM", b at the body after it). */
static int do_nvrm(struct gh_kmsg_parser *p, struct line_ctx *lc, size_t a, struct gh_err *err,
                   int *res)
{
    const char *s = lc->s;
    size_t n = lc->n;
    size_t b = gh_kmsg_skip_sp(s, n, a + 5);
    const char *body = s + b;
    size_t bn = n - b;
    char pci[PCI_LEN];
    size_t used;
    *res = R_MATCH;
    if (bn >= 3 && strncasecmp(body, "xid", 3) == 0 && (bn == 3 || !isalpha((unsigned char)body[3])))
        return do_xid(p, lc, a, b + 3, err, res);
    if (starts(body, bn, "GPU at ")) {
        size_t k = 7;
        if (bn - k >= 4 && strncasecmp(body + k, "PCI:", 4) == 0)
            k += 4;
        else if (!parse_bdf(body + k, bn - k, true, pci, NULL))
            goto none;
        /* older drivers: "NVRM: GPU at %04x:%02x:%02x.%x has fallen off the bus." */
        if (k == 7 && find(body + k, bn - k, "fallen off the bus")) {
            set_other(lc, GH_KMSG_O_GPU_FALLEN_OFF_BUS);
            return emit_simple(p, lc, GH_KIND_GPU_LOST, s + a, pci, NULL, err);
        }
        set_other(lc, GH_KMSG_O_GPU_UUID_MAP);
        if (parse_bdf(body + k, bn - k, true, pci, &used)) {
            k += used;
            if (k < bn && body[k] == ':') {
                k = gh_kmsg_skip_sp(body, bn, k + 1);
                size_t ue = gh_kmsg_token_end(body, bn, k);
                if (ue > k)
                    uuid_put(p, pci, body + k, ue - k);
            }
        }
        return GH_OK;
    }
    if (starts(body, bn, "GPU Board Serial Number")) {
        set_other(lc, GH_KMSG_O_GPU_SERIAL);
        return GH_OK;
    }
    if (starts(body, bn, "The NVIDIA probe routine failed")) {
        set_other(lc, GH_KMSG_O_PROBE_FAILED);
        return GH_OK;
    }
    if (starts(body, bn, "The NVIDIA GPU ")) {
        size_t k = 15;
        if (!parse_bdf(body + k, bn - k, true, pci, &used))
            goto none;
        const char *rest = body + k + used;
        size_t rn = bn - k - used;
        size_t rt = rn;
        trim_end(rest, &rt);
        bool lost = find(rest, rn, "fallen off the bus") != NULL;
        if (!lost && rt != 0 &&
            !(rt >= 28 && memcmp(rest + rt - 28, "installed in this system has", 28) == 0))
            goto none;
        set_other(lc, GH_KMSG_O_GPU_LOST_PROBE);
        probe_open(p, lc, pci, s + a, n - a);
        return lost ? probe_emit(p, lc, err) : GH_OK;
    }
    if (starts(body, bn, "(PCI ID:") && find(body, bn, "installed in this system has")) {
        set_other(lc, GH_KMSG_O_GPU_LOST_PROBE);
        if (p->pr_open)
            probe_append(p, s + a, n - a);
        return GH_OK;
    }
    if (starts(body, bn, "fallen off the bus")) {
        set_other(lc, GH_KMSG_O_GPU_LOST_PROBE);
        if (p->pr_open) {
            probe_append(p, s + a, n - a);
        } else {
            char none[PCI_LEN] = "";
            probe_open(p, lc, none, s + a, n - a);
        }
        return probe_emit(p, lc, err);
    }
    if (starts(body, bn, "GPU ") && parse_bdf(body + 4, bn - 4, true, pci, &used) &&
        4 + used < bn && body[4 + used] == ':') {
        const char *rest = body + 4 + used;
        size_t rn = bn - 4 - used;
        if (find(rest, rn, "serial number is")) {
            set_other(lc, GH_KMSG_O_GPU_SERIAL);
            return GH_OK;
        }
        if (find(rest, rn, "fallen off the bus")) {
            set_other(lc, GH_KMSG_O_GPU_FALLEN_OFF_BUS);
            return emit_simple(p, lc, GH_KIND_GPU_LOST, s + a, pci, NULL, err);
        }
        goto none;
    }
    if (starts(body, bn, "knvlink") && find(body, bn, "PostRxDet") &&
        (find(body, bn, "failed") || find(body, bn, "Failed"))) {
        set_other(lc, GH_KMSG_O_NVLINK_POST_RX_DETECT_FAILURE);
        return emit_simple(p, lc, GH_KIND_NVLINK, s + a, NULL, "post_rx_detect_failure", err);
    }
    if (find(body, bn, "GPU has fallen off the bus")) {
        set_other(lc, GH_KMSG_O_GPU_FALLEN_OFF_BUS);
        if (!first_bdf(body, bn, pci))
            pci[0] = '\0';
        return emit_simple(p, lc, GH_KIND_GPU_LOST, s + a, pci, NULL, err);
    }
none:
    *res = R_NONE;
    return GH_OK;
}

/* The device a PCIe/NIC line is about: the first PCI address in its message. */
static void line_device(const struct gh_kmsg_parser *p, struct line_ctx *lc, size_t lim, char *pci)
{
    need_wrap(p, lc);
    size_t o = lc->w.msg_off < lim ? lc->w.msg_off : 0;
    if (!first_bdf(lc->s + o, lim - o, pci))
        pci[0] = '\0';
}

static bool corr_name(const char *s, size_t n)
{
    static const char *const names[] = {"RxErr", "Receiver Error", "BadTLP", "Bad TLP", "BadDLLP",
                                        "Bad DLLP", "Rollover", "Timeout", "NonFatalErr",
                                        "CorrIntErr", "HeaderOF"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (find(s, n, names[i]))
            return true;
    return false;
}

/* PCIe AER lines. */
static int do_aer(struct gh_kmsg_parser *p, struct line_ctx *lc, struct gh_err *err, int *res)
{
    const char *s = lc->s;
    size_t n = lc->n;
    char pci[PCI_LEN];
    *res = R_MATCH;
    const char *be = find(s, n, "PCIe Bus Error: severity=");
    if (be) {
        const char *sv = be + 25;
        size_t sn = (size_t)(s + n - sv);
        const char *counter;
        if (starts(sv, sn, "Corrected") || starts(sv, sn, "Correctable")) {
            counter = "aer_correctable";
            p->aer_ctx = AER_CORR;
            set_other(lc, GH_KMSG_O_PCIE_AER_CORRECTABLE);
        } else if (starts(sv, sn, "Uncorrect")) {
            const char *c = memchr(sv, ',', sn);
            size_t k = c ? (size_t)(c - sv) : sn;
            counter = find(sv, k, "Non-Fatal") ? "aer_uncorrectable"
                      : find(sv, k, "Fatal")   ? "aer_fatal"
                                               : "aer_uncorrectable";
            p->aer_ctx = AER_UNC;
            set_other(lc, GH_KMSG_O_PCIE_AER);
        } else {
            goto none;
        }
        line_device(p, lc, (size_t)(be - s), pci);
        return emit_simple(p, lc, GH_KIND_PCIE, s + lc->w.msg_off, pci, counter, err);
    }
    const char *ae = find(s, n, "AER:");
    if (ae) {
        size_t k = gh_kmsg_skip_sp(s, n, (size_t)(ae - s) + 4);
        const char *r = s + k;
        size_t rn = n - k;
        if (starts(r, rn, "Multiple "))
            r += 9, rn -= 9;
        if ((starts(r, rn, "Corrected error") || starts(r, rn, "Correctable error")) &&
            find(r, rn, "received")) {
            p->aer_ctx = AER_CORR;
            set_other(lc, GH_KMSG_O_PCIE_AER_CORRECTABLE);
            return GH_OK;
        }
        if (starts(r, rn, "Uncorrect") && find(r, rn, "received")) {
            p->aer_ctx = AER_UNC;
            set_other(lc, GH_KMSG_O_PCIE_AER);
            return GH_OK;
        }
        const char *counter = NULL;
        if (starts(r, rn, "can't recover") || starts(r, rn, "device recovery failed") ||
            starts(r, rn, "Device recovery failed"))
            counter = "aer_recovery_failed";
        else if (find(r, rn, "link has been reset"))
            counter = "link_reset";
        if (counter || starts(r, rn, "device recovery successful") ||
            starts(r, rn, "Device recovery successful") ||
            starts(r, rn, "subordinate device reset failed")) {
            p->aer_ctx = AER_UNC;
            set_other(lc, GH_KMSG_O_PCIE_AER);
            if (!counter)
                return GH_OK;
            line_device(p, lc, (size_t)(ae - s), pci);
            return emit_simple(p, lc, GH_KIND_PCIE, s + lc->w.msg_off, pci, counter, err);
        }
        if (starts(r, rn, "TLP Header:") || starts(r, rn, "aer_status:") ||
            starts(r, rn, "aer_layer=") || starts(r, rn, "aer_mask:") || starts(r, rn, "[") ||
            starts(r, rn, "device [") || starts(r, rn, "Error of this Agent")) {
            int cls = p->aer_prev ? p->aer_prev
                      : (starts(r, rn, "[") && corr_name(r, rn)) ? AER_CORR
                                                                 : AER_UNC;
            p->aer_ctx = cls;
            set_other(lc, cls == AER_CORR ? GH_KMSG_O_PCIE_AER_CORRECTABLE : GH_KMSG_O_PCIE_AER);
            return GH_OK;
        }
    }
none:
    *res = R_NONE;
    return GH_OK;
}

/* A detail line of an AER report with no keyword of its own:
 * "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=..." or
 * "pcieport 0000:00:03.0:    [14] CmpltTO  (First)". */
static bool aer_detail(const struct gh_kmsg_parser *p, struct line_ctx *lc)
{
    const char *s = lc->s;
    size_t n = lc->n;
    if (find(s, n, "error status/mask="))
        return true;
    need_wrap(p, lc);
    size_t i = lc->w.msg_off;
    i = gh_kmsg_token_end(s, n, i); /* driver */
    i = gh_kmsg_skip_sp(s, n, i);
    char pci[PCI_LEN];
    size_t used;
    if (!parse_bdf(s + i, n - i, false, pci, &used) || i + used >= n || s[i + used] != ':')
        return false;
    i = gh_kmsg_skip_sp(s, n, i + used + 1);
    if (i < n && s[i] == '[') {
        size_t j = gh_kmsg_skip_sp(s, n, i + 1);
        size_t d = j;
        while (d < n && isdigit((unsigned char)s[d]))
            d++;
        return d > j && d < n && s[d] == ']';
    }
    return starts(s + i, n - i, "TLP Header:");
}

static int do_mlx5(struct gh_kmsg_parser *p, struct line_ctx *lc, struct gh_err *err, int *res)
{
    const char *s = lc->s;
    size_t n = lc->n;
    char pci[PCI_LEN];
    *res = R_MATCH;
    if (find(s, n, "insufficient power on the PCIe slot")) {
        set_other(lc, GH_KMSG_O_MLX5_PCIE_INSUFFICIENT_POWER);
        line_device(p, lc, n, pci);
        return emit_simple(p, lc, GH_KIND_NIC, s + lc->w.msg_off, pci, "pcie_insufficient_power",
                           err);
    }
    const char *pm = find(s, n, "Port module event");
    if (pm && (starts(pm + 17, (size_t)(s + n - pm - 17), "[error]") ||
               find(pm, (size_t)(s + n - pm), "High Temperature"))) {
        set_other(lc, GH_KMSG_O_MLX5_PORT_MODULE_ERROR);
        line_device(p, lc, n, pci);
        return emit_simple(p, lc, GH_KIND_NIC, s + lc->w.msg_off, pci, "port_module_error", err);
    }
    const char *ce = find(s, n, "mlx5_cmd_out_err");
    if (ce && find(ce, (size_t)(s + n - ce), "ACCESS_REG") &&
        find(ce, (size_t)(s + n - ce), "failed")) {
        set_other(lc, GH_KMSG_O_MLX5_ACCESS_REG_ERR);
        return GH_OK;
    }
    *res = R_NONE;
    return GH_OK;
}

/* Classifies one line (already cut to GH_KMSG_LINE_MAX, no newline) and
 * emits its signals. */
static int classify(struct gh_kmsg_parser *p, struct line_ctx *lc, struct gh_err *err)
{
    const char *s = lc->s;
    size_t n = lc->n;
    int rc = GH_OK, res = R_NONE;
    int ctx = p->aer_prev = p->aer_ctx;
    p->aer_ctx = AER_NONE;
    bool trig = has_trigger(s, n);
    if (!trig && !ctx)
        return GH_OK;
    if (trig) {
        const char *hit;
        if ((hit = find(s, n, "NVRM:")) && (rc = do_nvrm(p, lc, (size_t)(hit - s), err, &res)))
            return rc;
        if (res == R_NONE && (hit = find(s, n, "SXid")) &&
            (rc = do_sxid(p, lc, (size_t)(hit - s), err, &res)))
            return rc;
        if (res == R_NONE && (find(s, n, "AER:") || find(s, n, "PCIe Bus Error")) &&
            (rc = do_aer(p, lc, err, &res)))
            return rc;
        if (res == R_NONE && find(s, n, "mlx5_") && (rc = do_mlx5(p, lc, err, &res)))
            return rc;
        if (res == R_NONE && (hit = find(s, n, "segfault at")) && find(hit, (size_t)(s + n - hit), "libnccl")) {
            set_other(lc, GH_KMSG_O_NCCL_SEGFAULT);
            res = R_MATCH;
        }
        if (res == R_NONE && find(s, n, "nvidia-peermem") && find(s, n, "invalid context")) {
            set_other(lc, GH_KMSG_O_PEERMEM_INVALID_CONTEXT);
            res = R_MATCH;
        }
    }
    if (res == R_NONE && ctx && aer_detail(p, lc)) {
        p->aer_ctx = ctx;
        set_other(lc, ctx == AER_CORR ? GH_KMSG_O_PCIE_AER_CORRECTABLE : GH_KMSG_O_PCIE_AER);
    }
    return GH_OK;
}

static void note_seq(struct gh_kmsg_parser *p, const char *s, size_t n)
{
    uint64_t seq;
    int64_t usec;
    size_t off;
    if (n && isdigit((unsigned char)s[0]) && gh_kmsg_wrap_record(s, n, &seq, &usec, &off)) {
        p->has_last_seq = true;
        p->last_seq = seq;
    }
}

static void count_line(struct gh_kmsg_parser *p, size_t raw_len)
{
    p->line_no++;
    p->st.lines++;
    if (raw_len > GH_KMSG_LINE_MAX)
        p->st.truncated++;
}

/* The slow path for one complete line of raw_len bytes (s holds at least
 * min(raw_len, GH_KMSG_LINE_MAX)). */
static int slow_line(struct gh_kmsg_parser *p, const char *s, size_t raw_len,
                     struct gh_kmsg_label *out, struct gh_err *err)
{
    count_line(p, raw_len);
    size_t n = raw_len > GH_KMSG_LINE_MAX ? GH_KMSG_LINE_MAX : raw_len;
    if (n && s[n - 1] == '\r')
        n--;
    int rc = sx_expire(p, false, err);
    if (rc)
        return rc;
    if (p->pr_open && p->line_no - p->pr_line > PROBE_LINES)
        p->pr_open = false;
    struct line_ctx lc;
    memset(&lc, 0, sizeof lc);
    lc.s = s;
    lc.n = n;
    /* a UTF-8 byte order mark opening the input (files saved by some editors
     * and Windows tools) is no part of the first line's wrapper */
    if (p->line_no == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        lc.s += 3, lc.n -= 3;
    rc = classify(p, &lc, err);
    note_seq(p, s, n);
    switch (lc.label.cls) {
    case GH_KMSG_XID: p->st.xid_lines++, p->st.matched++; break;
    case GH_KMSG_SXID: p->st.sxid_lines++, p->st.matched++; break;
    case GH_KMSG_OTHER: p->st.other_lines++, p->st.matched++; break;
    default: break;
    }
    if (out)
        *out = lc.label;
    if (p->on_line)
        p->on_line(p->line_ctx, s, n, &lc.label);
    return rc;
}

/* A complete line that is not inside a feed buffer's fast region. */
static int consume_line(struct gh_kmsg_parser *p, const char *s, size_t raw_len,
                        struct gh_err *err)
{
    size_t n = raw_len > GH_KMSG_LINE_MAX ? GH_KMSG_LINE_MAX : raw_len;
    if (p->on_line || p->aer_ctx || has_trigger(s, n))
        return slow_line(p, s, raw_len, NULL, err);
    count_line(p, raw_len);
    return GH_OK;
}

/* Complete lines [s, e), e[-1] == '\n'; bufend bounds readable bytes. */
static int consume_region(struct gh_kmsg_parser *p, const char *s, const char *e,
                          const char *bufend, struct gh_err *err)
{
    const char *ls = s, *q = s;
    int rc;
    while (ls < e) {
        if (p->on_line || p->aer_ctx) {
            const char *le = memchr(ls, '\n', (size_t)(e - ls));
            if ((rc = slow_line(p, ls, (size_t)(le - ls), NULL, err)))
                return rc;
            ls = q = le + 1;
            continue;
        }
        const char *t = NULL;
#ifdef GH_KMSG_SSE2
        while (q < e && q + 17 <= bufend) {
            unsigned nl = nl_mask(q), tr = pair_mask(q);
            if ((size_t)(e - q) < 16) {
                unsigned lim = (1u << (e - q)) - 1;
                nl &= lim, tr &= lim;
            }
            while (tr) {
                int b = __builtin_ctz(tr);
                if (verify_at(s, q + b, e)) {
                    t = q + b;
                    nl &= (1u << b) - 1;
                    break;
                }
                tr &= tr - 1;
            }
            while (nl) {
                const char *nlp = q + __builtin_ctz(nl);
                count_line(p, (size_t)(nlp - ls));
                ls = nlp + 1;
                nl &= nl - 1;
            }
            if (t)
                break;
            q += 16;
        }
#endif
        if (!t) {
            for (; q < e; q++) {
                if (*q == '\n') {
                    count_line(p, (size_t)(q - ls));
                    ls = q + 1;
                } else if (pair_at(q) && verify_at(s, q, e)) {
                    t = q;
                    break;
                }
            }
            if (!t)
                break;
        }
        const char *le = memchr(t, '\n', (size_t)(e - t));
        if ((rc = slow_line(p, ls, (size_t)(le - ls), NULL, err)))
            return rc;
        ls = q = le + 1;
    }
    return GH_OK;
}

static void part_add(struct gh_kmsg_parser *p, const char *s, size_t n)
{
    size_t room = GH_KMSG_LINE_MAX - p->part_len;
    size_t k = n < room ? n : room;
    memcpy(p->part + p->part_len, s, k);
    p->part_len += k;
    p->part_raw += n;
}

static int stop(struct gh_kmsg_parser *p, int rc)
{
    p->part_len = p->part_raw = 0;
    return rc;
}

int gh_kmsg_parser_feed(struct gh_kmsg_parser *p, const char *buf, size_t len, struct gh_err *err)
{
    int rc;
    if (!len)
        return GH_OK;
    p->st.bytes += len;
    const char *end = buf + len, *s = buf;
    if (p->part_raw) {
        const char *nl = memchr(buf, '\n', len);
        if (!nl) {
            part_add(p, buf, len);
            return GH_OK;
        }
        part_add(p, buf, (size_t)(nl - buf));
        size_t raw = p->part_raw;
        p->part_raw = 0;
        rc = consume_line(p, p->part, raw, err);
        if (!rc)
            note_seq(p, p->part, p->part_len);
        p->part_len = 0;
        if (rc)
            return stop(p, rc);
        s = nl + 1;
    }
    const char *last = s < end ? memrchr(s, '\n', (size_t)(end - s)) : NULL;
    if (last) {
        if ((rc = consume_region(p, s, last + 1, end, err)))
            return stop(p, rc);
        const char *ls = last > s ? memrchr(s, '\n', (size_t)(last - s)) : NULL;
        ls = ls ? ls + 1 : s;
        note_seq(p, ls, (size_t)(last - ls));
        s = last + 1;
    }
    if (s < end)
        part_add(p, s, (size_t)(end - s));
    return GH_OK;
}

int gh_kmsg_parser_flush(struct gh_kmsg_parser *p, struct gh_err *err)
{
    int rc;
    if (p->part_raw) {
        size_t raw = p->part_raw;
        p->part_raw = 0;
        rc = consume_line(p, p->part, raw, err);
        if (!rc)
            note_seq(p, p->part, p->part_len);
        p->part_len = 0;
        if (rc)
            return rc;
    }
    return sx_expire(p, true, err);
}

int gh_kmsg_parser_line(struct gh_kmsg_parser *p, const char *line, size_t len,
                        struct gh_kmsg_label *label, struct gh_err *err)
{
    if (len && line[len - 1] == '\n')
        len--;
    p->st.bytes += len;
    return slow_line(p, line, len, label, err);
}

const struct gh_kmsg_meta *gh_kmsg_parser_meta(const struct gh_kmsg_parser *p)
{
    return p->cur_meta;
}

const char *gh_kmsg_parser_uuid(const struct gh_kmsg_parser *p, const char *pci)
{
    char norm[PCI_LEN];
    if (!pci || !gh_pci_canon(pci, strlen(pci), NULL, norm, sizeof norm))
        return NULL;
    for (size_t i = 0; i < p->uuid_n; i++)
        if (strcmp(p->uuid[i].pci, norm) == 0)
            return p->uuid[i].uuid;
    return NULL;
}

bool gh_kmsg_parser_last_seq(const struct gh_kmsg_parser *p, uint64_t *seq)
{
    if (p->has_last_seq && seq)
        *seq = p->last_seq;
    return p->has_last_seq;
}

void gh_kmsg_parser_stats(const struct gh_kmsg_parser *p, struct gh_kmsg_stats *out)
{
    *out = p->st;
}

size_t gh_kmsg_parser_rejects(const struct gh_kmsg_parser *p, struct gh_kmsg_reject *out,
                              size_t cap)
{
    size_t n = p->rej_n < cap ? p->rej_n : cap;
    size_t first = (p->rej_next + GH_KMSG_REJECTS_KEEP - p->rej_n) % GH_KMSG_REJECTS_KEEP;
    first = (first + (p->rej_n - n)) % GH_KMSG_REJECTS_KEEP;   /* keep the newest n */
    for (size_t i = 0; i < n; i++)
        out[i] = p->rej[(first + i) % GH_KMSG_REJECTS_KEEP];
    return n;
}
