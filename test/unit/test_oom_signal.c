/* test_oom_signal.c - the signal codec and the kernel-log parser under
 * allocation failure (alloc_fail.h): JSON decode (reference and fast),
 * encode, the JSON Lines reader, gh_signal_copy, and the kmsg parser fed a
 * kernel log. At every failure point the call returns an error, or its
 * result equals the one without injection; ASan's leak check at exit finds
 * what a failed call left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "signal/kmsg.h"
#include "signal/signal.h"
#include "signal/signal_fast.h"
#include "signal/signal_json.h"

#define MAX_POINTS 10000

/* Lines that together use every string field and several kinds; the
 * telemetry ones are what the fast decoder takes itself. Each is already in
 * the encoder's canonical form. */
static const char *const lines[] = {
    "{\"ts\":\"2026-11-29T07:00:00.123456Z\",\"node\":\"gpu-01\",\"gpu\":3,\"pci\":\"0000:3b:00.0\","
    "\"source\":\"nvml\",\"kind\":\"xid\",\"code\":48,\"pid\":4242,\"process\":\"python3\",\"msg\":"
    "\"m\",\"id\":\"gpu-01/boot-1/17\",\"injected\":true}",
    "{\"ts\":\"2026-11-29T07:00:00.000001Z\",\"node\":\"gpu-01\",\"source\":\"kmsg\",\"kind\":"
    "\"sxid\",\"code\":12028,\"switch\":\"nvidia-nvswitch1\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"source\":\"host\",\"kind\":"
    "\"nic\",\"device\":\"mlx5_0\",\"port\":1,\"counter\":\"link_downed\",\"count\":4,\"state\":"
    "\"down\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"source\":\"telemetry\","
    "\"kind\":\"step\",\"job\":\"llm\",\"rank\":0,\"step\":7,\"step_ms\":1000.25,\"comm_ms\":0.5,"
    "\"loss\":\"nan\",\"tokens_per_s\":123456.0,\"id\":\"s-7\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
    "\"job\":\"ml/llm\",\"step\":0,\"path\":\"/ckpt/0\",\"state\":\"failed\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-02\",\"gpu\":4,\"source\":"
    "\"telemetry\",\"kind\":\"replica_checksum\",\"job\":\"ml/llm\",\"step\":100,\"rank\":12,"
    "\"replica\":1,\"value\":\"deadBEEF0123\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"kube\",\"kind\":\"pod_failed\","
    "\"namespace\":\"ml\",\"pod\":\"w-0\",\"job\":\"ml/llm\",\"reason\":\"OOMKilled\","
    "\"exit_code\":-9,\"msg\":\"killed\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"gpu\":0,\"source\":\"probe\","
    "\"kind\":\"probe_result\",\"check\":\"gemm_checksum\",\"passed\":false,\"detail\":"
    "\"mismatch on SM 17\"}",
};
#define N_LINES (sizeof lines / sizeof lines[0])

/* s encoded without injection (paused), compared with want; 0 when equal. */
static int same_as(const struct gh_signal *s, const char *want)
{
    char *out = NULL;
    gh_af_pause();
    int rc = gh_signal_encode(s, &out, NULL);
    gh_af_resume();
    assert_int_equal(rc, GH_OK);
    int diff = strcmp(out, want);
    if (diff)
        print_error("got  %s\nwant %s\n", out, want);
    free(out);
    return diff;
}

/* ---- decode (reference, fast, fast path alone) ------------------------------ */

struct decode_ctx {
    const char *line;
    int (*decode)(const char *text, size_t len, long line_no, struct gh_signal *out,
                  struct gh_err *err);
};

static int op_decode(void *arg)
{
    struct decode_ctx *c = arg;
    struct gh_signal s;
    struct gh_err err;
    int rc = c->decode(c->line, strlen(c->line), 1, &s, &err);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        assert_null(s.node); /* left cleared */
        assert_null(s.msg);
        return rc;
    }
    assert_int_equal(same_as(&s, c->line), 0);
    gh_signal_clear(&s);
    return 0;
}

static void test_decode(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LINES; i++) {
        struct decode_ctx c = {lines[i], gh_signal_decode};
        assert_true(gh_af_each(op_decode, &c, true, MAX_POINTS) > 0);
    }
}

static void test_fast_decode(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LINES; i++) {
        struct decode_ctx c = {lines[i], gh_signal_fast_decode};
        /* a fast-path failure may be recovered by the reference decoder,
         * so success after a failed allocation is allowed (op compares) */
        assert_true(gh_af_each(op_decode, &c, false, MAX_POINTS) > 0);
    }
}

static int op_fast_try(void *arg)
{
    const char *line = arg;
    struct gh_signal s;
    int rc = gh_signal_fast_try(line, strlen(line), &s);
    if (rc) {
        /* the fast path alone says "go to the reference decoder" */
        assert_int_equal(rc, GH_EAGAIN);
        assert_null(s.job);
        return rc;
    }
    assert_int_equal(same_as(&s, line), 0);
    gh_signal_clear(&s);
    return 0;
}

static void test_fast_try(void **state)
{
    (void)state;
    for (size_t i = 3; i <= 5; i++) /* the three telemetry kinds */
        assert_true(gh_af_each(op_fast_try, (void *)lines[i], true, MAX_POINTS) > 0);
}

/* ---- encode, copy ------------------------------------------------------------ */

struct sig_ctx {
    struct gh_signal s;
    const char *line;
};

static int op_encode(void *arg)
{
    struct sig_ctx *c = arg;
    char *out = NULL;
    struct gh_err err;
    int rc = gh_signal_encode(&c->s, &out, &err);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        assert_null(out);
        return rc;
    }
    assert_string_equal(out, c->line);
    free(out);
    return 0;
}

static int op_copy(void *arg)
{
    struct sig_ctx *c = arg;
    struct gh_signal d;
    struct gh_err err;
    gh_signal_init(&d);
    int rc = gh_signal_copy(&d, &c->s, &err);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        gh_signal_clear(&d);
        return rc;
    }
    assert_int_equal(same_as(&d, c->line), 0);
    gh_signal_clear(&d);
    return 0;
}

static void test_encode_and_copy(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LINES; i++) {
        struct sig_ctx c = {.line = lines[i]};
        assert_int_equal(gh_signal_decode(lines[i], strlen(lines[i]), 1, &c.s, NULL), GH_OK);
        /* the encoder's own allocations: it decodes its output back to check it */
        gh_af_each(op_encode, &c, true, MAX_POINTS);
        assert_true(gh_af_each(op_copy, &c, true, MAX_POINTS) > 0);
        gh_signal_clear(&c.s);
    }
}

/* ---- the JSON Lines reader ----------------------------------------------------- */

static char *reader_input(size_t *len)
{
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    n += (size_t)snprintf(buf + n, cap - n, "{\"scenario\":\"s\",\"nodes\":[\"gpu-01\"]}\n\n");
    for (size_t i = 0; i < N_LINES; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s\n", lines[i]);
    n += (size_t)snprintf(buf + n, cap - n, "{\"kind\":1}\n");
    assert_true(n < cap);
    *len = n;
    return buf;
}

static int op_reader(void *arg)
{
    size_t len;
    const char *text = arg;
    len = strlen(text);
    gh_af_pause();
    FILE *f = fmemopen((void *)text, len, "r");
    gh_af_resume();
    assert_non_null(f);
    int rc = GH_OK;
    size_t got = 0, bad = 0, headers = 0;
    struct gh_signal_reader *r = gh_signal_reader_new(f);
    if (!r) {
        rc = GH_ENOMEM;
        goto out;
    }
    for (;;) {
        struct gh_signal s;
        json_t *hdr = NULL;
        struct gh_err err;
        int n = gh_signal_reader_next(r, &s, &hdr, &err);
        if (n == GH_ENOTFOUND)
            break;
        if (n == GH_EINVAL) {
            bad++;
            continue;
        }
        if (n) {
            assert_int_equal(n, GH_ENOMEM);
            rc = n;
            break;
        }
        if (hdr) {
            headers++;
            json_decref(hdr);
            continue;
        }
        assert_true(got < N_LINES);
        assert_int_equal(same_as(&s, lines[got]), 0);
        got++;
        gh_signal_clear(&s);
    }
    if (!rc) {
        assert_int_equal(got, N_LINES);
        assert_int_equal(headers, 1);
        assert_int_equal(bad, 1);
    }
out:
    gh_signal_reader_free(r);
    fclose(f);
    return rc;
}

static void test_reader(void **state)
{
    (void)state;
    size_t len;
    char *text = reader_input(&len);
    assert_true(gh_af_each(op_reader, text, true, MAX_POINTS) > 0);
    free(text);
}

/* ---- the kernel-log parser ----------------------------------------------------- */

static const char kmsg_text[] =
    "[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: "
    "GPU-509665ad-b600-ac93-3616-d754b23d636d\n"
    "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, "
    "Timeout after 6s of waiting for RPC response from GPU4 GSP!\n"
    "[6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n"
    "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM "
    "Fault Up\n"
    "[6781753.400590] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Data {0x10000000, "
    "0x10000000}\n"
    "[Sun Dec  1 14:54:40 2024] ny2g1r12hh2 kernel: mlx5_core 0000:5c:00.0: "
    "mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).\n"
    "NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
    "bus\n"
    "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
    "Layer, (Receiver ID)\n"
    "NVRM: Xid (PCI:0000:9b:00): bogus\n"
    "6,1234,5678901,-;NVRM: Xid (PCI:0000:9b:00): 48, pid=7, name=x, An uncorrectable double "
    "bit error\n"
    "[6781753.500000] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 "
    "egress non-posted PRIV error";

struct kmsg_out {
    char text[16384]; /* the emitted signals, encoded, one a line */
    size_t len;
    size_t signals;
};

static int kmsg_emit(void *ctx, const struct gh_signal *s)
{
    struct kmsg_out *o = ctx;
    char *line = NULL;
    gh_af_pause();
    assert_int_equal(gh_signal_encode(s, &line, NULL), GH_OK);
    gh_af_resume();
    int n = snprintf(o->text + o->len, sizeof o->text - o->len, "%s\n", line);
    assert_true(n > 0 && (size_t)n < sizeof o->text - o->len);
    o->len += (size_t)n;
    o->signals++;
    free(line);
    return 0;
}

static int64_t fixed_now(void *ctx)
{
    (void)ctx;
    return 1764400000000000000LL;
}

static int run_kmsg(struct kmsg_out *o, struct gh_kmsg_stats *st)
{
    static const struct gh_clock fixed = {fixed_now, NULL};
    memset(o, 0, sizeof *o);
    struct gh_kmsg_opts opts;
    gh_kmsg_opts_init(&opts);
    opts.node = "gpu-01";
    opts.boot_id = "boot-1";
    opts.boot_time_ns = 1700000000000000000LL;
    opts.default_year = 2025;
    opts.clock = &fixed;
    opts.emit = kmsg_emit;
    opts.emit_ctx = o;
    struct gh_kmsg_parser *p = NULL;
    struct gh_err err;
    int rc = gh_kmsg_parser_new(&p, &opts, &err);
    if (rc)
        return rc;
    /* in two chunks, so that a partial line is kept between feeds */
    size_t half = sizeof kmsg_text / 2;
    rc = gh_kmsg_parser_feed(p, kmsg_text, half, &err);
    if (!rc)
        rc = gh_kmsg_parser_feed(p, kmsg_text + half, sizeof kmsg_text - 1 - half, &err);
    if (!rc)
        rc = gh_kmsg_parser_flush(p, &err);
    if (st)
        gh_kmsg_parser_stats(p, st);
    gh_kmsg_parser_free(p);
    return rc;
}

static struct kmsg_out kmsg_want;

static int op_kmsg(void *arg)
{
    struct kmsg_out *o = arg;
    int rc = run_kmsg(o, NULL);
    if (rc) {
        assert_int_equal(rc, GH_ENOMEM);
        return rc;
    }
    assert_string_equal(o->text, kmsg_want.text);
    return 0;
}

static void test_kmsg(void **state)
{
    (void)state;
    struct gh_kmsg_stats st;
    static struct kmsg_out o;
    /* lines without a stamp take the fixed clock's time, so every run
     * emits the same text */
    assert_int_equal(run_kmsg(&kmsg_want, &st), GH_OK);
    assert_true(kmsg_want.signals >= 6);
    assert_int_equal(st.rejected, 1);
    assert_true(gh_af_each(op_kmsg, &o, true, MAX_POINTS) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_decode, gh_af_setup),
        cmocka_unit_test_setup(test_fast_decode, gh_af_setup),
        cmocka_unit_test_setup(test_fast_try, gh_af_setup),
        cmocka_unit_test_setup(test_encode_and_copy, gh_af_setup),
        cmocka_unit_test_setup(test_reader, gh_af_setup),
        cmocka_unit_test_setup(test_kmsg, gh_af_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
