/* fuzz_telemetry.c - libFuzzer target for the telemetry socket's line
 * handling (gh_telemetry_ingest): arbitrary bytes fed whole and in
 * pseudo-random chunks (derived from the input) with a small line cap; both
 * runs must accept, reject and emit the same, every emitted signal must be a
 * telemetry kind that re-encodes, the counters must add up, and rejects must
 * be printable (aborts otherwise). Seeds: test/fuzz/telemetry/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/telemetry.h"
#include "signal/signal_json.h"

#define LINE_MAX_FUZZ 512

struct run {
    uint64_t hash;
    uint64_t n;
};

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_telemetry: %s: %s\n", what, detail ? detail : "");
    abort();
}

static void on_signal(void *ctx, const struct gh_signal *s)
{
    struct run *r = ctx;
    struct gh_err err = {{0}};
    char *json = NULL;
    if (s->source != GH_SRC_TELEMETRY)
        die("emitted a signal that is not telemetry", gh_source_name(s->source));
    if (s->kind != GH_KIND_STEP && s->kind != GH_KIND_CHECKPOINT &&
        s->kind != GH_KIND_REPLICA_CHECKSUM)
        die("emitted a kind that is not telemetry", gh_kind_name(s->kind));
    if (!s->node)
        die("node not filled", NULL);
    int rc = gh_signal_encode(s, &json, &err);
    if (rc != GH_OK && rc != GH_ELIMIT)
        die("emitted signal does not encode", err.msg);
    for (const char *p = json; p && *p; p++)
        r->hash = (r->hash ^ (unsigned char)*p) * 1099511628211ULL;
    r->n++;
    free(json);
}

static struct gh_telemetry *make(struct run *r)
{
    struct gh_telemetry_opts o;
    struct gh_telemetry *t = NULL;
    gh_telemetry_opts_init(&o);
    o.socket_path = "";
    o.node = "fuzz-node";
    o.line_max = LINE_MAX_FUZZ;
    o.max_ranks = 64;
    o.emit = on_signal;
    o.emit_ctx = r;
    if (gh_telemetry_new(&o, &t, NULL) != GH_OK)
        die("gh_telemetry_new failed", NULL);
    return t;
}

static void check_stats(struct gh_telemetry *t, const struct run *r,
                        struct gh_telemetry_stats *st)
{
    gh_telemetry_stats(t, st);
    if (st->accepted + st->rejected != st->lines)
        die("accepted + rejected != lines", NULL);
    if (st->emitted != r->n || st->emitted != st->accepted)
        die("emitted != accepted", NULL);
    if (st->oversized > st->rejected)
        die("oversized > rejected", NULL);
    struct gh_telemetry_reject rj[GH_TELEMETRY_REJECTS_KEEP];
    size_t n = gh_telemetry_rejects(t, rj, GH_TELEMETRY_REJECTS_KEEP);
    for (size_t i = 0; i < n; i++) {
        for (const char *p = rj[i].line; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                die("non-printable reject line", rj[i].line);
        if (strncmp(rj[i].reason, "line ", 5) != 0)
            die("reject without its line number", rj[i].reason);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct run whole = {1469598103934665603ULL, 0}, chunked = {1469598103934665603ULL, 0};
    struct gh_telemetry_stats a, b;

    struct gh_telemetry *t = make(&whole);
    gh_telemetry_ingest(t, (const char *)data, size, true);
    check_stats(t, &whole, &a);
    gh_telemetry_free(t);

    t = make(&chunked);
    uint32_t x = 2166136261u;
    for (size_t i = 0; i < size && i < 16; i++)
        x = (x ^ data[i]) * 16777619u;
    size_t off = 0;
    while (off < size) {
        x = x * 1103515245u + 12345u;
        size_t n = 1 + (x >> 16) % 97;
        if (n > size - off)
            n = size - off;
        gh_telemetry_ingest(t, (const char *)data + off, n, false);
        off += n;
    }
    gh_telemetry_ingest(t, NULL, 0, true);
    check_stats(t, &chunked, &b);
    gh_telemetry_free(t);

    if (whole.n != chunked.n || whole.hash != chunked.hash)
        die("whole and chunked runs emitted different signals", NULL);
    if (a.lines != b.lines || a.accepted != b.accepted || a.rejected != b.rejected ||
        a.oversized != b.oversized)
        die("whole and chunked runs counted differently", NULL);
    return 0;
}
