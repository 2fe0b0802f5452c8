/* fuzz_telemetry_decode.c - differential libFuzzer target: the fast
 * telemetry decoder (signal_fast.h) against gh_signal_decode (jansson), on
 * the whole input as one line and on each of its '\n'-separated lines.
 * Whenever the fast path alone accepts a line, gh_signal_decode must accept
 * it too with every field equal and the same encoding; and
 * gh_signal_fast_decode (fast path plus fallback) must give exactly what
 * gh_signal_decode gives: return code, error message, signal. Aborts on any
 * disagreement. Seeds: test/fuzz/telemetry_decode/. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signal/signal_fast.h"
#include "signal/signal_json.h"

static void die(const char *what, const char *line, size_t n, const char *a, const char *b)
{
    fprintf(stderr, "fuzz_telemetry_decode: %s\n  line:  %.*s\n  ref:   %s\n  fast:  %s\n", what,
            (int)(n > 300 ? 300 : n), line, a ? a : "(none)", b ? b : "(none)");
    abort();
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_dbl(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* Every field of struct gh_signal (signal.h), by name; NULL when equal. */
static const char *differ(const struct gh_signal *a, const struct gh_signal *b)
{
#define SCALAR(f)                                                                                \
    if (a->f != b->f)                                                                            \
        return #f;
#define STRING(f)                                                                                \
    if (!same_str(a->f, b->f))                                                                   \
        return #f;
#define DOUBLE(f)                                                                                \
    if (!same_dbl(a->f, b->f))                                                                   \
        return #f;
    SCALAR(ts_ns) SCALAR(source) SCALAR(kind) STRING(node) SCALAR(gpu) STRING(pci)
    STRING(uuid) STRING(msg) STRING(id) SCALAR(injected)
    SCALAR(code) SCALAR(has_pid) SCALAR(pid) STRING(process) STRING(switch_id)
    SCALAR(has_count) SCALAR(count) SCALAR(bits) SCALAR(is_volatile)
    SCALAR(pending) SCALAR(failure) SCALAR(correctable) SCALAR(uncorrectable)
    STRING(counter) SCALAR(has_link) SCALAR(link) STRING(device) SCALAR(has_port)
    SCALAR(port) SCALAR(state)
    DOUBLE(celsius) DOUBLE(watts) SCALAR(throttled)
    STRING(job) SCALAR(has_rank) SCALAR(rank) SCALAR(has_step) SCALAR(step)
    DOUBLE(step_ms) SCALAR(has_comm_ms) DOUBLE(comm_ms) SCALAR(has_loss) DOUBLE(loss)
    SCALAR(has_tokens_per_s) DOUBLE(tokens_per_s) STRING(path) SCALAR(ckpt_state)
    SCALAR(replica) STRING(value)
    STRING(namespace_) STRING(pod) STRING(reason) SCALAR(has_exit_code) SCALAR(exit_code)
    STRING(check) SCALAR(passed) STRING(detail)
#undef SCALAR
#undef STRING
#undef DOUBLE
    return NULL;
}

static void same_encoding(const char *line, size_t n, const struct gh_signal *ref,
                          const struct gh_signal *fast)
{
    struct gh_err e1 = {{0}}, e2 = {{0}};
    char *j1 = NULL, *j2 = NULL;
    int r1 = gh_signal_encode(ref, &j1, &e1), r2 = gh_signal_encode(fast, &j2, &e2);
    if (r1 != r2 || (r1 && strcmp(e1.msg, e2.msg) != 0))
        die("encoding results differ", line, n, e1.msg, e2.msg);
    if (!r1 && strcmp(j1, j2) != 0)
        die("encodings differ", line, n, j1, j2);
    free(j1);
    free(j2);
}

static void check_line(const char *line, size_t n, long line_no)
{
    struct gh_err eref = {{0}}, efast = {{0}};
    struct gh_signal ref, fast, both;
    const char *f;

    int rref = gh_signal_decode(line, n, line_no, &ref, &eref);
    int rtry = gh_signal_fast_try(line, n, &fast);
    if (rtry != GH_OK && rtry != GH_EAGAIN)
        die("fast path returned neither GH_OK nor GH_EAGAIN", line, n, NULL, NULL);
    if (rtry == GH_OK) {
        if (rref != GH_OK)
            die("fast path accepts what gh_signal_decode rejects", line, n, eref.msg, "accepted");
        if ((f = differ(&ref, &fast)))
            die("decoded signals differ in a field", line, n, f, f);
        same_encoding(line, n, &ref, &fast);
    } else if (fast.node || fast.job || fast.gpu != -1 || fast.has_step) {
        die("a punted line left the signal filled", line, n, NULL, NULL);
    }
    gh_signal_clear(&fast);

    int rboth = gh_signal_fast_decode(line, n, line_no, &both, &efast);
    if (rboth != rref)
        die("return codes differ", line, n, eref.msg, efast.msg);
    if (rref != GH_OK && strcmp(eref.msg, efast.msg) != 0)
        die("error messages differ", line, n, eref.msg, efast.msg);
    if (rref == GH_OK && (f = differ(&ref, &both)))
        die("decoded signals differ in a field (with fallback)", line, n, f, f);
    gh_signal_clear(&both);
    gh_signal_clear(&ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    check_line(text, size, 3);
    long line_no = 0;
    const char *p = text, *end = text + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        check_line(p, n, ++line_no);
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}
