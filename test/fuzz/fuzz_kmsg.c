/* fuzz_kmsg.c - libFuzzer target for the kernel-log parser: arbitrary bytes
 * fed whole, in pseudo-random chunks (derived from the input) and with the
 * per-line callback on; the three runs must emit the same signals and count
 * the same lines, and every signal must be well formed (aborts otherwise).
 * Seeds: test/fuzz/kmsg/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pci.h"
#include "signal/kmsg.h"
#include "signal/signal_json.h"

static int64_t fixed_now(void *ctx)
{
    (void)ctx;
    return 1764403200LL * GH_NS_PER_S;
}

static const struct gh_clock fuzz_clock = {fixed_now, NULL};

struct run {
    struct gh_kmsg_parser *p;
    uint64_t hash;
    uint64_t n;
};

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_kmsg: %s: %s\n", what, detail ? detail : "");
    abort();
}

static uint64_t mix(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    return s ? mix(h, s, strlen(s) + 1) : mix(h, "\xff", 1);
}

static int on_signal(void *ctx, const struct gh_signal *s)
{
    struct run *r = ctx;
    const struct gh_kmsg_meta *m = gh_kmsg_parser_meta(r->p);
    if (!m)
        die("no meta during emit", NULL);
    if (s->source != GH_SRC_KMSG || (unsigned)s->kind >= GH_KIND__COUNT || !s->msg)
        die("malformed signal", s->msg);
    if (strlen(s->msg) > 4096)
        die("msg over its cap", NULL);
    /* the encoder refuses invalid UTF-8: whatever bytes the log held, every
     * string of a signal must be valid */
    const char *strs[] = {s->msg, s->process, s->switch_id, s->uuid, s->pci, s->counter};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (strs[i] && !gh_utf8_valid(strs[i], strlen(strs[i])))
            die("string not valid UTF-8", NULL);
    if (s->pci) {
        char norm[24];
        if (!gh_pci_canon(s->pci, strlen(s->pci), NULL, norm, sizeof norm) ||
            strcmp(norm, s->pci) != 0)
            die("pci not normalised", s->pci);
    }
    uint64_t h = r->hash;
    h = mix(h, &s->kind, sizeof s->kind);
    h = mix(h, &s->code, sizeof s->code);
    h = mix(h, &s->ts_ns, sizeof s->ts_ns);
    h = mix(h, &s->has_pid, sizeof s->has_pid);
    if (s->has_pid)
        h = mix(h, &s->pid, sizeof s->pid);
    h = mix_str(h, s->pci);
    h = mix_str(h, s->process);
    h = mix_str(h, s->switch_id);
    h = mix_str(h, s->counter);
    h = mix_str(h, s->msg);
    h = mix(h, &m->line_no, sizeof m->line_no);
    h = mix(h, &m->folded, sizeof m->folded);
    h = mix(h, &m->gpu_instance, sizeof m->gpu_instance);
    r->hash = h;
    r->n++;
    return 0;
}

static void on_line(void *ctx, const char *line, size_t len, const struct gh_kmsg_label *l)
{
    (void)ctx, (void)line;
    if (len > GH_KMSG_LINE_MAX)
        die("line over its cap", NULL);
    char buf[GH_KMSG_LABEL_MAX];
    struct gh_kmsg_label back;
    gh_kmsg_label_format(l, buf, sizeof buf);
    if (gh_kmsg_label_parse(buf, strlen(buf), &back) || back.cls != l->cls)
        die("label does not round-trip", buf);
}

/* mode 0: whole; 1: chunks; 2: whole with on_line */
static void run(const uint8_t *data, size_t size, int mode, struct run *r, struct gh_kmsg_stats *st)
{
    struct gh_kmsg_opts o;
    gh_kmsg_opts_init(&o);
    o.node = "fuzz";
    o.boot_id = "b";
    o.clock = &fuzz_clock;
    o.boot_time_ns = 1761955200LL * GH_NS_PER_S;
    o.emit = on_signal;
    o.emit_ctx = r;
    if (mode == 2)
        o.on_line = on_line;
    memset(r, 0, sizeof *r);
    r->hash = 14695981039346656037ULL;
    if (gh_kmsg_parser_new(&r->p, &o, NULL))
        die("parser_new", NULL);
    uint64_t seed = mix(14695981039346656037ULL, data, size);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off;
        if (mode == 1) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t k = (size_t)(seed >> 33);
            n = (k & 3) == 0 ? 1 + k % 4 : 1 + k % 300;
            if (n > size - off)
                n = size - off;
        }
        if (gh_kmsg_parser_feed(r->p, (const char *)data + off, n, NULL))
            die("feed failed", NULL);
        off += n;
    }
    if (gh_kmsg_parser_flush(r->p, NULL))
        die("flush failed", NULL);
    gh_kmsg_parser_stats(r->p, st);
    struct gh_kmsg_reject rej[GH_KMSG_REJECTS_KEEP];
    size_t nr = gh_kmsg_parser_rejects(r->p, rej, GH_KMSG_REJECTS_KEEP);
    for (size_t i = 0; i < nr; i++)
        if (!rej[i].reason || strlen(rej[i].line) >= sizeof rej[i].line)
            die("bad reject", NULL);
    (void)gh_kmsg_parser_uuid(r->p, "0000:01:00.0");
    gh_kmsg_parser_free(r->p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct run a, b, c;
    struct gh_kmsg_stats sa, sb, sc;
    run(data, size, 0, &a, &sa);
    run(data, size, 1, &b, &sb);
    run(data, size, 2, &c, &sc);
    if (a.hash != b.hash || a.n != b.n)
        die("chunked feed emitted other signals", NULL);
    if (a.hash != c.hash || a.n != c.n)
        die("on_line feed emitted other signals", NULL);
    if (sa.lines != sb.lines || sa.lines != sc.lines || sa.matched != sb.matched ||
        sa.rejected != sb.rejected || sa.folded != sb.folded || sa.truncated != sb.truncated ||
        sa.signals != sb.signals || sa.bytes != size)
        die("stats differ between chunkings", NULL);
    return 0;
}
