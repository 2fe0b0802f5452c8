/* fuzz_ingest.c - libFuzzer target for the ingest endpoint's body parsing
 * (wire/wire.h): arbitrary bytes as a POST /v1/signals body through
 * gh_ingest_parse with the server's duplicate check, and the reply summary
 * through encode -> decode. Aborts when the counts do not add up, an error
 * names a line outside the body or out of order, or the reply does not
 * read back. Seeds: test/fuzz/ingest/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/dedup.h"
#include "wire/token.h"
#include "wire/wire.h"

struct ctx {
    struct gh_dedup *seen;
    uint64_t taken;
    long last_line;
};

static void die(const char *what)
{
    fprintf(stderr, "fuzz_ingest: %s\n", what);
    abort();
}

static enum gh_ingest_take take(void *vctx, long line, struct gh_signal *sig)
{
    struct ctx *c = vctx;
    if (line <= c->last_line)
        die("lines handed over out of order");
    c->last_line = line;
    if (sig->id) {
        struct gh_dedup_key k;
        gh_dedup_key(sig->id, strlen(sig->id), &k);
        if (!gh_dedup_insert(c->seen, &k))
            return GH_INGEST_DUPLICATE;
    }
    c->taken++;
    gh_signal_clear(sig); /* stolen: ours to free */
    return GH_INGEST_TAKEN;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctx c = {0};
    struct gh_ingest_result res;
    struct gh_err err;
    struct gh_ingest_limits lim = {.line_max = 4096, .max_lines = 2000};
    c.seen = gh_dedup_new(64);
    if (!c.seen)
        return 0;
    const char *body = (const char *)data;
    size_t lines = gh_ingest_count_lines(body, size);
    int rc = gh_ingest_parse(body, size, &lim, take, &c, &res, &err);
    if (rc == GH_ELIMIT) {
        if (lines <= lim.max_lines)
            die("GH_ELIMIT under the line limit");
    } else if (rc == GH_OK) {
        if (res.accepted != c.taken)
            die("accepted != taken");
        if (res.accepted + res.duplicates + res.rejected > lines)
            die("more verdicts than lines");
        if (res.n_errors > res.rejected || (res.rejected > res.n_errors && !res.errors_truncated))
            die("errors itemised wrongly");
        long prev = 0;
        for (size_t i = 0; i < res.n_errors; i++) {
            long l = res.errors[i].line;
            if (l <= prev || (size_t)l > lines)
                die("error line out of order or outside the body");
            prev = l;
            if (strncmp(res.errors[i].error, "line ", 5) == 0)
                die("error keeps a line prefix");
            for (const char *p = res.errors[i].error; *p; p++)
                if ((unsigned char)*p < 0x20)
                    die("control character in an error");
        }
        char *reply = gh_ingest_reply_encode(&res);
        if (reply) {
            struct gh_ingest_result back;
            if (gh_ingest_reply_decode(reply, strlen(reply), &back, &err) != GH_OK)
                die("reply does not decode");
            if (back.accepted != res.accepted || back.duplicates != res.duplicates ||
                back.rejected != res.rejected || back.n_errors != res.n_errors)
                die("reply does not round-trip");
            for (size_t i = 0; i < back.n_errors; i++)
                if (back.errors[i].line != res.errors[i].line ||
                    strcmp(back.errors[i].error, res.errors[i].error) != 0)
                    die("reply errors do not round-trip");
            free(reply);
        }
    } else if (rc != GH_ENOMEM) {
        die("unexpected result");
    }
    /* The same bytes as a reply and as an Authorization header must not
     * crash either. */
    struct gh_ingest_result back;
    gh_ingest_reply_decode(body, size, &back, &err);
    if (size < 8192) {
        char hdr[8192];
        memcpy(hdr, data, size);
        hdr[size] = '\0';
        struct gh_token_set set = {0};
        set.n = 1;
        gh_token_set_check_header(&set, hdr);
    }
    gh_dedup_free(c.seen);
    return 0;
}
