/* fuzz_signal_json.c - libFuzzer target for the signal JSON codec: arbitrary
 * bytes through gh_signal_decode and through the line reader, and for every
 * signal that decodes, encode -> decode -> encode must reproduce the first
 * encoding byte for byte (aborts otherwise). Seeds: test/fuzz/signal_json/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal/signal_json.h"

static void die(const char *what, const char *detail, const char *a, const char *b)
{
    fprintf(stderr, "fuzz_signal_json: %s: %s\n  first:  %s\n  second: %s\n", what, detail,
            a ? a : "(none)", b ? b : "(none)");
    abort();
}

/* Error details are single printable lines, always "line N: ..." when N > 0. */
static void check_err(const struct gh_err *err, long line)
{
    for (const char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            die("control character in an error message", err->msg, NULL, NULL);
    if (line > 0) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "line %ld: ", line);
        if (strncmp(err->msg, prefix, strlen(prefix)) != 0)
            die("error without its line", err->msg, prefix, NULL);
    }
}

static void check_roundtrip(const struct gh_signal *s)
{
    struct gh_err err = {{0}};
    struct gh_signal again;
    char *first = NULL, *second = NULL;

    int rc = gh_signal_encode(s, &first, &err);
    if (rc == GH_ELIMIT) /* the re-encoding can outgrow a line near the cap */
        return;
    if (rc)
        die("a decoded signal does not encode", err.msg, NULL, NULL);
    rc = gh_signal_decode(first, strlen(first), 0, &again, &err);
    if (rc)
        die("an encoded signal does not decode", err.msg, first, NULL);
    rc = gh_signal_encode(&again, &second, &err);
    if (rc)
        die("a re-decoded signal does not encode", err.msg, first, NULL);
    if (strcmp(first, second) != 0)
        die("encoding is not stable", "", first, second);
    free(first);
    free(second);
    gh_signal_clear(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gh_err err = {{0}};
    struct gh_signal s;

    /* the whole input as one line */
    int rc = gh_signal_decode((const char *)data, size, 7, &s, &err);
    if (rc == GH_OK) {
        check_roundtrip(&s);
        gh_signal_clear(&s);
    } else if (rc != GH_EINVAL) {
        die("unexpected decode result", err.msg, NULL, NULL);
    } else {
        check_err(&err, 7);
    }

    /* the input as a JSON Lines file; every call consumes at least a line */
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
    if (!f)
        return 0;
    struct gh_signal_reader *r = gh_signal_reader_new(f);
    if (!r) {
        fclose(f);
        return 0;
    }
    long last = 0;
    for (;;) {
        json_t *header = NULL;
        /* alternate: with and without accepting scenario headers */
        rc = gh_signal_reader_next(r, &s, (last & 1) ? NULL : &header, &err);
        if (rc == GH_ENOTFOUND)
            break;
        long line = gh_signal_reader_line(r);
        if (line <= last)
            die("the reader went backwards", err.msg, NULL, NULL);
        last = line;
        if (rc == GH_OK && header) {
            if (!json_is_object(header) || !json_object_get(header, "scenario"))
                die("a header that is not one", "", NULL, NULL);
            json_decref(header);
        } else if (rc == GH_OK) {
            check_roundtrip(&s);
            gh_signal_clear(&s);
        } else if (rc == GH_EINVAL) {
            check_err(&err, line);
            if (s.node || s.gpu != -1)
                die("a failed read left the signal filled", err.msg, NULL, NULL);
        } else {
            die("unexpected reader result", err.msg, NULL, NULL);
        }
    }
    gh_signal_reader_free(r);
    fclose(f);
    return 0;
}
