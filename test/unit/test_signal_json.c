/* test_signal_json.c - unit tests of the signal JSON codec (signal_json.c)
 * and of the RFC 3339 time functions it relies on (timeutil.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "signal/signal.h"
#include "signal/signal_json.h"

/* ---- helpers ---------------------------------------------------------------- */

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool dbl_eq(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Field-by-field equality of two signals (every field, whatever the kind). */
static bool sig_eq(const struct gh_signal *a, const struct gh_signal *b)
{
#define S(f) str_eq(a->f, b->f)
#define V(f) (a->f == b->f)
#define D(f) dbl_eq(a->f, b->f)
    return V(ts_ns) && V(source) && V(kind) && S(node) && V(gpu) && S(pci) && S(msg) && S(id) &&
           V(injected) && V(code) && V(has_pid) && V(pid) && S(process) && S(switch_id) &&
           V(has_count) && V(count) && V(bits) && V(is_volatile) && V(pending) && V(failure) &&
           V(correctable) && V(uncorrectable) && S(counter) && V(has_link) && V(link) &&
           S(device) && V(has_port) && V(port) && V(state) && D(celsius) && D(watts) &&
           V(throttled) && S(job) && V(has_rank) && V(rank) && V(has_step) && V(step) &&
           D(step_ms) && V(has_comm_ms) && D(comm_ms) && V(has_loss) && D(loss) &&
           V(has_tokens_per_s) && D(tokens_per_s) && S(path) && V(ckpt_state) && V(job_state) &&
           V(replica) && S(value) && S(namespace_) && S(pod) && S(reason) &&
           V(has_exit_code) && V(exit_code) && S(check) && V(passed) && S(detail) &&
           S(condition) && V(cond_status);
#undef S
#undef V
#undef D
}

static void decode_ok(const char *text, struct gh_signal *out)
{
    struct gh_err err = {{0}};
    int rc = gh_signal_decode(text, strlen(text), 1, out, &err);
    if (rc)
        fail_msg("decode of %s failed: %s", text, err.msg);
}

static char *encode_ok(const struct gh_signal *s)
{
    struct gh_err err = {{0}};
    char *out = NULL;
    int rc = gh_signal_encode(s, &out, &err);
    if (rc)
        fail_msg("encode failed: %s", err.msg);
    return out;
}

static void expect_decode_err(const char *text, long line, int rc_want, const char *msg)
{
    struct gh_err err = {{0}};
    struct gh_signal s;
    int rc = gh_signal_decode(text, strlen(text), line, &s, &err);
    assert_int_equal(rc, rc_want);
    assert_string_equal(err.msg, msg);
    /* left cleared */
    assert_null(s.node);
    assert_int_equal(s.gpu, -1);
}

static void expect_encode_err(const struct gh_signal *s, int rc_want, const char *msg)
{
    struct gh_err err = {{0}};
    char *out = (char *)"sentinel";
    assert_int_equal(gh_signal_encode(s, &out, &err), rc_want);
    assert_null(out);
    assert_string_equal(err.msg, msg);
}

static void set(char **field, const char *v)
{
    assert_int_equal(gh_signal_set_str(field, v, strlen(v)), GH_OK);
}

static int64_t ts(const char *text)
{
    int64_t ns = 0;
    assert_true(gh_time_parse_rfc3339(text, strlen(text), &ns));
    return ns;
}

/* ---- the spec's examples ---------------------------------------------------- */

static const char *const spec_examples[] = {
    "{\"ts\":\"2026-11-29T07:00:00.123456Z\",\"node\":\"gpu-17\",\"pci\":\"0000:3b:00.0\","
    "\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79,\"msg\":\"NVRM: Xid (PCI:0000:3b:00): 79, "
    "pid=1234, GPU has fallen off the bus.\"}",
    "{\"ts\":\"2026-11-29T07:00:01.000000Z\",\"node\":\"gpu-03\",\"gpu\":5,\"source\":"
    "\"telemetry\",\"kind\":\"step\",\"job\":\"ml/llm-70b\",\"rank\":45,\"step\":1200,"
    "\"step_ms\":1432.5,\"comm_ms\":210.1,\"loss\":2.31}",
    "{\"ts\":\"2026-11-29T07:00:02.500000Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
    "\"job\":\"ml/llm-70b\",\"step\":1000,\"path\":\"s3://ckpt/llm-70b/step-1000\",\"state\":"
    "\"saved\"}",
    "{\"ts\":\"2026-11-29T07:00:03.000000Z\",\"node\":\"gpu-03\",\"source\":\"kube\",\"kind\":"
    "\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"llm-70b-worker-45\",\"job\":\"ml/llm-70b\","
    "\"reason\":\"Error\",\"exit_code\":1,\"msg\":\"NCCL watchdog timeout\"}",
};

static void test_spec_examples(void **state)
{
    (void)state;
    struct gh_signal s;

    decode_ok(spec_examples[0], &s);
    assert_int_equal(s.ts_ns, ts("2026-11-29T07:00:00.123456Z"));
    assert_string_equal(s.node, "gpu-17");
    assert_string_equal(s.pci, "0000:3b:00.0");
    assert_int_equal(s.gpu, -1);
    assert_int_equal(s.source, GH_SRC_KMSG);
    assert_int_equal(s.kind, GH_KIND_XID);
    assert_int_equal(s.code, 79);
    assert_false(s.has_pid);
    assert_non_null(strstr(s.msg, "fallen off the bus"));
    assert_false(s.injected);
    gh_signal_clear(&s);

    decode_ok(spec_examples[1], &s);
    assert_int_equal(s.gpu, 5);
    assert_int_equal(s.kind, GH_KIND_STEP);
    assert_string_equal(s.job, "ml/llm-70b");
    assert_true(s.has_rank && s.rank == 45);
    assert_true(s.has_step && s.step == 1200);
    assert_true(s.step_ms == 1432.5);
    assert_true(s.has_comm_ms && s.comm_ms == 210.1);
    assert_true(s.has_loss && s.loss == 2.31);
    assert_false(s.has_tokens_per_s);
    gh_signal_clear(&s);

    decode_ok(spec_examples[2], &s);
    assert_null(s.node);
    assert_int_equal(s.kind, GH_KIND_CHECKPOINT);
    assert_int_equal(s.step, 1000);
    assert_string_equal(s.path, "s3://ckpt/llm-70b/step-1000");
    assert_int_equal(s.ckpt_state, GH_CKPT_SAVED);
    gh_signal_clear(&s);

    decode_ok(spec_examples[3], &s);
    assert_int_equal(s.source, GH_SRC_KUBE);
    assert_string_equal(s.namespace_, "ml");
    assert_string_equal(s.pod, "llm-70b-worker-45");
    assert_string_equal(s.reason, "Error");
    assert_true(s.has_exit_code && s.exit_code == 1);
    assert_string_equal(s.msg, "NCCL watchdog timeout");
    gh_signal_clear(&s);

    /* The examples are already in the encoder's order and number format:
     * they encode back byte for byte. */
    for (size_t i = 0; i < sizeof spec_examples / sizeof spec_examples[0]; i++) {
        decode_ok(spec_examples[i], &s);
        char *out = encode_ok(&s);
        assert_string_equal(out, spec_examples[i]);
        free(out);
        gh_signal_clear(&s);
    }
}

/* ---- every kind: canonical lines ---------------------------------------------- */

/* One line per kind with every field, written in the encoder's canonical
 * form: decode -> encode gives the same bytes; decode again gives an equal
 * signal. */
static const char *const canonical[] = {
    "{\"ts\":\"2026-11-29T07:00:00.123456Z\",\"node\":\"gpu-01\",\"gpu\":3,\"pci\":\"0000:3b:00.0\","
    "\"source\":\"nvml\",\"kind\":\"xid\",\"code\":48,\"pid\":4242,\"process\":\"python3\",\"msg\":"
    "\"m\",\"id\":\"gpu-01/boot-1/17\",\"injected\":true}",
    "{\"ts\":\"2026-11-29T07:00:00.000001Z\",\"node\":\"gpu-01\",\"source\":\"kmsg\",\"kind\":"
    "\"sxid\",\"code\":12028,\"switch\":\"nvidia-nvswitch1\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":0,\"source\":\"dcgm\","
    "\"kind\":\"ecc\",\"bits\":\"double\",\"count\":2,\"volatile\":true}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":7,\"source\":\"nvml\","
    "\"kind\":\"row_remap\",\"pending\":true,\"failure\":false,\"correctable\":1,"
    "\"uncorrectable\":3}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":2,\"source\":\"nvml\","
    "\"kind\":\"gpu_lost\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":2,\"source\":\"dcgm\","
    "\"kind\":\"nvlink\",\"link\":11,\"counter\":\"crc_flit\",\"count\":9000000000}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"pci\":\"0000:3b:00.0\","
    "\"source\":\"kmsg\",\"kind\":\"pcie\",\"counter\":\"aer_uncorrectable\",\"count\":1}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"source\":\"host\",\"kind\":"
    "\"nic\",\"device\":\"mlx5_0\",\"port\":1,\"counter\":\"link_downed\",\"count\":4,\"state\":"
    "\"down\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":1,\"source\":\"nvml\","
    "\"kind\":\"thermal\",\"celsius\":91.5,\"throttled\":true}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-01\",\"gpu\":1,\"source\":\"dcgm\","
    "\"kind\":\"power\",\"watts\":700.0,\"throttled\":false}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"telemetry\",\"kind\":\"step\",\"job\":"
    "\"llm\",\"rank\":0,\"step\":7,\"step_ms\":1000.25,\"comm_ms\":0.5,\"loss\":\"nan\","
    "\"tokens_per_s\":123456.0}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"telemetry\",\"kind\":\"checkpoint\","
    "\"job\":\"ml/llm\",\"step\":0,\"path\":\"/ckpt/0\",\"state\":\"failed\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-02\",\"gpu\":4,\"source\":"
    "\"telemetry\",\"kind\":\"replica_checksum\",\"job\":\"ml/llm\",\"step\":100,\"rank\":12,"
    "\"replica\":1,\"value\":\"deadBEEF0123\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"kube\",\"kind\":\"pod_failed\","
    "\"namespace\":\"ml\",\"pod\":\"w-0\",\"reason\":\"OOMKilled\",\"exit_code\":-9}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"source\":\"kube\",\"kind\":"
    "\"pod_started\",\"namespace\":\"ml\",\"pod\":\"w-0\",\"job\":\"ml/llm\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"source\":\"kube\",\"kind\":"
    "\"node_not_ready\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"source\":\"kube\",\"kind\":"
    "\"node_ready\",\"msg\":\"kubelet is posting ready status\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"gpu\":0,\"source\":\"probe\","
    "\"kind\":\"probe_result\",\"check\":\"gemm_checksum\",\"passed\":false,\"detail\":"
    "\"mismatch on SM 17 \\\"x\\\" \\u0001 \xc3\xa9\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"source\":\"kube\",\"kind\":"
    "\"pod_succeeded\",\"namespace\":\"ml\",\"pod\":\"w-0\",\"job\":\"ml/llm\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"source\":\"kube\",\"kind\":\"job_finished\","
    "\"job\":\"ml/llm\",\"state\":\"complete\"}",
    "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"gpu-05\",\"source\":\"kube\",\"kind\":"
    "\"node_condition\",\"condition\":\"KernelDeadlock\",\"status\":\"True\",\"reason\":"
    "\"DockerHung\"}",
};

static void test_canonical_every_kind(void **state)
{
    (void)state;
    bool seen[GH_KIND__COUNT] = {false};
    for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++) {
        struct gh_signal a, b;
        decode_ok(canonical[i], &a);
        seen[a.kind] = true;
        char *out = encode_ok(&a);
        assert_string_equal(out, canonical[i]);
        decode_ok(out, &b);
        assert_true(sig_eq(&a, &b));
        free(out);
        gh_signal_clear(&a);
        gh_signal_clear(&b);
    }
    for (int k = 0; k < GH_KIND__COUNT; k++)
        if (!seen[k])
            fail_msg("kind %s has no canonical line", gh_kind_name(k));
}

/* ---- every kind: built structs ------------------------------------------------- */

static void build(struct gh_signal *s, enum gh_kind kind)
{
    gh_signal_init(s);
    s->ts_ns = ts("2026-11-29T07:00:00.654321Z");
    s->kind = kind;
    s->source = GH_SRC_NVML;
    set(&s->node, "gpu-09");
    s->gpu = 6;
    switch (kind) {
    case GH_KIND_XID:
        s->code = 79;
        s->has_pid = true, s->pid = 77;
        set(&s->process, "trainer");
        break;
    case GH_KIND_SXID:
        s->source = GH_SRC_KMSG;
        s->code = 20034;
        set(&s->switch_id, "sw0");
        break;
    case GH_KIND_ECC:
        s->bits = GH_ECC_SINGLE, s->has_count = true, s->count = 123, s->is_volatile = false;
        break;
    case GH_KIND_ROW_REMAP:
        s->pending = false, s->failure = true, s->correctable = 0, s->uncorrectable = 8;
        break;
    case GH_KIND_GPU_LOST:
        break;
    case GH_KIND_NVLINK:
        s->has_link = true, s->link = 0, s->has_count = true, s->count = 0;
        set(&s->counter, "replay");
        break;
    case GH_KIND_PCIE:
        set(&s->counter, "replay");
        s->has_count = true, s->count = INT64_MAX;
        break;
    case GH_KIND_NIC:
        s->source = GH_SRC_HOST, s->gpu = -1;
        set(&s->device, "mlx5_3");
        s->has_port = true, s->port = 2;
        set(&s->counter, "symbol_error");
        s->has_count = true, s->count = 5;
        s->state = GH_LINK_UP;
        break;
    case GH_KIND_THERMAL:
        s->celsius = -3.25, s->throttled = false;
        break;
    case GH_KIND_POWER:
        s->watts = 0.1 + 0.2, s->throttled = true; /* needs 17 digits */
        break;
    case GH_KIND_STEP:
        s->source = GH_SRC_TELEMETRY;
        set(&s->job, "ns/job");
        s->has_rank = true, s->rank = 1023;
        s->has_step = true, s->step = 1;
        s->step_ms = 1e-3;
        s->has_comm_ms = true, s->comm_ms = 1e300;
        s->has_loss = true, s->loss = -INFINITY;
        s->has_tokens_per_s = true, s->tokens_per_s = 0;
        break;
    case GH_KIND_CHECKPOINT:
        s->source = GH_SRC_TELEMETRY;
        set(&s->job, "j");
        s->has_step = true, s->step = 5;
        set(&s->path, "/p");
        s->ckpt_state = GH_CKPT_SAVED;
        break;
    case GH_KIND_REPLICA_CHECKSUM:
        s->source = GH_SRC_TELEMETRY;
        set(&s->job, "j");
        s->has_step = true, s->step = 5;
        s->has_rank = true, s->rank = 3;
        s->replica = 2;
        set(&s->value, "00ff");
        break;
    case GH_KIND_POD_FAILED:
        s->source = GH_SRC_KUBE;
        set(&s->namespace_, "ns");
        set(&s->pod, "p");
        set(&s->job, "ns/j");
        set(&s->reason, "Evicted");
        s->has_exit_code = true, s->exit_code = 137;
        set(&s->msg, "The node was low on resource: memory.");
        break;
    case GH_KIND_POD_STARTED:
        s->source = GH_SRC_KUBE;
        free(s->node), s->node = NULL, s->gpu = -1;
        set(&s->namespace_, "ns");
        set(&s->pod, "p");
        break;
    case GH_KIND_NODE_NOT_READY:
    case GH_KIND_NODE_READY:
        s->source = GH_SRC_KUBE, s->gpu = -1;
        break;
    case GH_KIND_PROBE_RESULT:
        s->source = GH_SRC_PROBE;
        set(&s->check, "dcgm_diag_l3");
        s->passed = true;
        break;
    case GH_KIND_POD_SUCCEEDED:
        s->source = GH_SRC_KUBE, s->gpu = -1;
        set(&s->namespace_, "ns");
        set(&s->pod, "p-0");
        set(&s->job, "ns/j");
        break;
    case GH_KIND_JOB_FINISHED:
        s->source = GH_SRC_KUBE, s->gpu = -1;
        free(s->node), s->node = NULL;
        set(&s->job, "ns/j");
        s->job_state = GH_JOB_FAILED;
        break;
    case GH_KIND_NODE_CONDITION:
        s->source = GH_SRC_KUBE, s->gpu = -1;
        set(&s->condition, "example.com/GpuHealthCheck");
        s->cond_status = GH_COND_UNKNOWN;
        break;
    case GH_KIND__COUNT:
        break;
    }
}

static void test_built_every_kind(void **state)
{
    (void)state;
    for (int k = 0; k < GH_KIND__COUNT; k++) {
        struct gh_signal a, b;
        build(&a, (enum gh_kind)k);
        char *out = encode_ok(&a);
        decode_ok(out, &b);
        if (!sig_eq(&a, &b))
            fail_msg("kind %s does not round-trip: %s", gh_kind_name(k), out);
        char *again = encode_ok(&b);
        assert_string_equal(out, again);
        free(again);
        free(out);
        gh_signal_clear(&a);
        gh_signal_clear(&b);
    }
}

static void test_encode_format(void **state)
{
    (void)state;
    struct gh_signal s;
    char *out;

    /* field order, absent fields omitted, injected only when true, -inf */
    build(&s, GH_KIND_STEP);
    s.gpu = -1;
    free(s.node), s.node = NULL;
    out = encode_ok(&s);
    assert_string_equal(out, "{\"ts\":\"2026-11-29T07:00:00.654321Z\",\"source\":\"telemetry\","
                             "\"kind\":\"step\",\"job\":\"ns/job\",\"rank\":1023,\"step\":1,"
                             "\"step_ms\":0.001,\"comm_ms\":1e300,\"loss\":\"-inf\","
                             "\"tokens_per_s\":0.0}");
    free(out);
    s.loss = INFINITY, s.has_comm_ms = false, s.has_tokens_per_s = false, s.injected = true;
    set(&s.id, "x-1");
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"step_ms\":0.001,\"loss\":\"inf\",\"id\":\"x-1\","
                                "\"injected\":true}"));
    free(out);
    s.loss = NAN;
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"loss\":\"nan\""));
    free(out);
    s.has_loss = false;
    out = encode_ok(&s);
    assert_null(strstr(out, "loss"));
    free(out);
    s.has_loss = true, s.loss = 2.0;
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"loss\":2.0,"));
    free(out);
    gh_signal_clear(&s);

    /* microseconds, truncated */
    build(&s, GH_KIND_GPU_LOST);
    s.ts_ns = ts("2026-11-29T07:00:00.999999999Z");
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"2026-11-29T07:00:00.999999Z\""));
    free(out);
    s.ts_ns = ts("2026-11-29T07:00:00Z");
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"2026-11-29T07:00:00.000000Z\""));
    free(out);
    gh_signal_clear(&s);

    /* a number that needs 17 digits stays exact */
    build(&s, GH_KIND_POWER);
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"watts\":0.30000000000000004,"));
    free(out);
    gh_signal_clear(&s);

    /* gh_signal_write */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    build(&s, GH_KIND_NODE_READY);
    struct gh_err err;
    assert_int_equal(gh_signal_write(f, &s, &err), GH_OK);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(buf, "{\"ts\":\"2026-11-29T07:00:00.654321Z\",\"node\":\"gpu-09\","
                             "\"source\":\"kube\",\"kind\":\"node_ready\"}\n");
    free(buf);
    gh_signal_clear(&s);
}

static void test_encode_refuses_invalid(void **state)
{
    (void)state;
    struct gh_signal s;

    build(&s, GH_KIND_NVLINK);
    free(s.counter);
    s.counter = NULL;
    expect_encode_err(&s, GH_EINVAL, "field \"counter\": missing");
    gh_signal_clear(&s);

    build(&s, GH_KIND_XID);
    free(s.node), s.node = NULL;
    expect_encode_err(&s, GH_EINVAL, "field \"node\": missing");
    s.source = GH_SRC_TELEMETRY; /* node optional there */
    char *out = encode_ok(&s);
    free(out);
    s.code = -1;
    expect_encode_err(&s, GH_EINVAL, "field \"code\": out of range");
    gh_signal_clear(&s);

    build(&s, GH_KIND_STEP);
    s.step_ms = NAN;
    expect_encode_err(&s, GH_EINVAL, "field \"step_ms\": not finite");
    s.step_ms = -1;
    expect_encode_err(&s, GH_EINVAL, "field \"step_ms\": out of range");
    s.step_ms = 1;
    set(&s.msg, "bad \xff utf-8");
    expect_encode_err(&s, GH_EINVAL, "field \"msg\": not valid UTF-8");
    set(&s.msg, "overlong \xc0\xaf");
    expect_encode_err(&s, GH_EINVAL, "field \"msg\": not valid UTF-8");
    set(&s.msg, "surrogate \xed\xa0\x80");
    expect_encode_err(&s, GH_EINVAL, "field \"msg\": not valid UTF-8");
    set(&s.msg, "fine \xf0\x9f\x94\xa5 \xe2\x82\xac");
    out = encode_ok(&s);
    free(out);
    set(&s.job, "");
    expect_encode_err(&s, GH_EINVAL, "field \"job\": empty");
    gh_signal_clear(&s);

    build(&s, GH_KIND_ECC);
    s.bits = (enum gh_ecc_bits)7;
    expect_encode_err(&s, GH_EINVAL, "field \"bits\": bad value 7");
    s.bits = GH_ECC_DOUBLE;
    s.ts_ns = INT64_MAX;
    expect_encode_err(&s, GH_EINVAL, "field \"ts\": out of range");
    s.ts_ns = 0;
    s.kind = GH_KIND__COUNT;
    char want[64];
    snprintf(want, sizeof want, "field \"kind\": bad value %d", (int)GH_KIND__COUNT);
    expect_encode_err(&s, GH_EINVAL, want);
    gh_signal_clear(&s);

    build(&s, GH_KIND_REPLICA_CHECKSUM);
    set(&s.value, "xyz");
    expect_encode_err(&s, GH_EINVAL, "field \"value\": not a hex string");
    gh_signal_clear(&s);

    /* over the line cap */
    build(&s, GH_KIND_GPU_LOST);
    char *big = malloc(GH_SIGNAL_LINE_MAX + 1);
    assert_non_null(big);
    memset(big, 'a', GH_SIGNAL_LINE_MAX);
    big[GH_SIGNAL_LINE_MAX] = '\0';
    s.msg = big;
    expect_encode_err(&s, GH_ELIMIT, "encoded signal longer than 65536 bytes");
    gh_signal_clear(&s);
}

/* ---- decode errors ------------------------------------------------------------- */

#define SIG(fields) "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"n\",\"source\":\"nvml\"," fields "}"

static void test_error_messages(void **state)
{
    (void)state;
    /* the forms of the brief, exactly */
    expect_decode_err("{\"ts\":\"yesterday\",\"source\":\"kube\",\"kind\":\"node_ready\"}", 12,
                      GH_EINVAL, "line 12: field \"ts\": not RFC 3339");
    expect_decode_err(SIG("\"kind\":\"foo\""), 3, GH_EINVAL,
                      "line 3: field \"kind\": unknown kind \"foo\"");
    expect_decode_err(SIG("\"kind\":\"xid\""), 7, GH_EINVAL, "line 7: field \"code\": missing");
    expect_decode_err("[1,2]", 2, GH_EINVAL, "line 2: not a JSON object");
    expect_decode_err("\"x\"", 2, GH_EINVAL, "line 2: not a JSON object");
    expect_decode_err("{\"ts\": 1,,}", 5, GH_EINVAL,
                      "line 5: invalid JSON at column 10: string or '}' expected near ','");
    expect_decode_err("{\"kind\":\"a\",\"kind\":\"b\"}", 5, GH_EINVAL,
                      "line 5: invalid JSON at column 18: duplicate object key near '\"kind\"'");
    expect_decode_err("", 9, GH_EINVAL, "line 9: invalid JSON: unexpected token near end of file");
    expect_decode_err("{} {}", 1, GH_EINVAL,
                      "line 1: invalid JSON at column 4: end of file expected near '{'");
    expect_decode_err("{\"a\":\"\\u0000\"}", 1, GH_EINVAL,
                      "line 1: invalid JSON at column 13: \\u0000 is not allowed without "
                      "JSON_ALLOW_NUL near '\"\\u0000\"'");
    /* line 0: no prefix */
    expect_decode_err("7", 0, GH_EINVAL, "not a JSON object");
    /* control characters from the input never reach the message */
    expect_decode_err(SIG("\"kind\":\"a\\nb\\u001b[31m\""), 1, GH_EINVAL,
                      "line 1: field \"kind\": unknown kind \"a?b?[31m\"");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"syslog\"}", 4, GH_EINVAL,
                      "line 4: field \"source\": unknown source \"syslog\"");
    /* node_condition: each bad value named by its field */
#define NC(rest) "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kube\",\"kind\":\"node_condition\"" rest "}"
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":\"KernelDeadlock\",\"status\":\"true\""), 2,
                      GH_EINVAL, "line 2: field \"status\": must be \"True\" or \"False\" or \"Unknown\"");
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":\"KernelDeadlock\",\"status\":true"), 2,
                      GH_EINVAL, "line 2: field \"status\": must be \"True\" or \"False\" or \"Unknown\"");
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":\"KernelDeadlock\""), 2, GH_EINVAL,
                      "line 2: field \"status\": missing");
    expect_decode_err(NC(",\"node\":\"n1\",\"status\":\"True\""), 2, GH_EINVAL,
                      "line 2: field \"condition\": missing");
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":\"\",\"status\":\"True\""), 2, GH_EINVAL,
                      "line 2: field \"condition\": empty");
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":7,\"status\":\"True\""), 2, GH_EINVAL,
                      "line 2: field \"condition\": not a string");
    expect_decode_err(NC(",\"node\":\"n1\",\"condition\":\"X\",\"status\":\"True\",\"reason\":[]"), 2,
                      GH_EINVAL, "line 2: field \"reason\": not a string");
    expect_decode_err(NC(",\"condition\":\"KernelDeadlock\",\"status\":\"False\""), 2, GH_EINVAL,
                      "line 2: field \"node\": missing");
#undef NC

    /* common fields */
    expect_decode_err("{\"source\":\"kube\",\"kind\":\"node_ready\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": missing");
    expect_decode_err("{\"ts\":null,\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": missing");
    expect_decode_err("{\"ts\":1,\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": not a string");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": not RFC 3339");
    expect_decode_err("{\"ts\":\"9999-12-31T23:59:59Z\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": out of range");
    expect_decode_err("{\"ts\":\"1600-02-29T00:00:00Z\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": out of range");
    expect_decode_err("{\"ts\":\"1700-02-29T00:00:00Z\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": not RFC 3339");
    expect_decode_err("{\"ts\":\"9999-99-31T23:59:59Z\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": not RFC 3339");
    expect_decode_err("{\"ts\":\"2261-12-31T23:00:00-01:00\",\"source\":\"kube\"}", 1, GH_EINVAL,
                      "line 1: field \"ts\": out of range");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"kind\":\"xid\"}", 1, GH_EINVAL,
                      "line 1: field \"source\": missing");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kmsg\"}", 1, GH_EINVAL,
                      "line 1: field \"kind\": missing");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kmsg\",\"kind\":7}", 1,
                      GH_EINVAL, "line 1: field \"kind\": not a string");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kmsg\",\"kind\":\"gpu_lost\"}",
                      1, GH_EINVAL, "line 1: field \"node\": missing");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kube\",\"kind\":\"node_ready\"}",
                      1, GH_EINVAL, "line 1: field \"node\": missing");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"node\":\"\""), 1, GH_EINVAL,
                      "line 1: invalid JSON at column 80: duplicate object key near '\"node\"'");
    expect_decode_err("{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"\",\"source\":\"probe\",\"kind\":"
                      "\"gpu_lost\"}",
                      1, GH_EINVAL, "line 1: field \"node\": empty");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"gpu\":-1"), 1, GH_EINVAL,
                      "line 1: field \"gpu\": out of range");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"gpu\":2147483648"), 1, GH_EINVAL,
                      "line 1: field \"gpu\": out of range");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"gpu\":1.5"), 1, GH_EINVAL,
                      "line 1: field \"gpu\": not an integer");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"gpu\":\"3\""), 1, GH_EINVAL,
                      "line 1: field \"gpu\": not an integer");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"gpu\":true"), 1, GH_EINVAL,
                      "line 1: field \"gpu\": not an integer");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"pci\":3"), 1, GH_EINVAL,
                      "line 1: field \"pci\": not a string");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"msg\":[]"), 1, GH_EINVAL,
                      "line 1: field \"msg\": not a string");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"id\":{}"), 1, GH_EINVAL,
                      "line 1: field \"id\": not a string");
    expect_decode_err(SIG("\"kind\":\"gpu_lost\",\"injected\":\"yes\""), 1, GH_EINVAL,
                      "line 1: field \"injected\": not a boolean");

    /* kind fields */
    expect_decode_err(SIG("\"kind\":\"xid\",\"code\":-79"), 1, GH_EINVAL,
                      "line 1: field \"code\": out of range");
    expect_decode_err(SIG("\"kind\":\"xid\",\"code\":79,\"pid\":-1"), 1, GH_EINVAL,
                      "line 1: field \"pid\": out of range");
    expect_decode_err(SIG("\"kind\":\"xid\",\"code\":79,\"process\":1"), 1, GH_EINVAL,
                      "line 1: field \"process\": not a string");
    expect_decode_err(SIG("\"kind\":\"xid\",\"code\":1e300"), 1, GH_EINVAL,
                      "line 1: field \"code\": not an integer");
    expect_decode_err(SIG("\"kind\":\"xid\",\"code\":99999999999999999999"), 1, GH_EINVAL,
                      "line 1: invalid JSON at column 96: too big integer near "
                      "'99999999999999999999'");
    expect_decode_err(SIG("\"kind\":\"ecc\",\"bits\":\"triple\",\"count\":1,\"volatile\":true"),
                      1, GH_EINVAL, "line 1: field \"bits\": must be \"single\" or \"double\"");
    expect_decode_err(SIG("\"kind\":\"ecc\",\"bits\":\"Single\",\"count\":1,\"volatile\":true"),
                      1, GH_EINVAL, "line 1: field \"bits\": must be \"single\" or \"double\"");
    expect_decode_err(SIG("\"kind\":\"ecc\",\"bits\":\"single\",\"count\":-1,\"volatile\":true"),
                      1, GH_EINVAL, "line 1: field \"count\": out of range");
    expect_decode_err(SIG("\"kind\":\"ecc\",\"bits\":\"single\",\"count\":1,\"volatile\":1"), 1,
                      GH_EINVAL, "line 1: field \"volatile\": not a boolean");
    expect_decode_err(SIG("\"kind\":\"ecc\",\"bits\":\"single\",\"count\":1"), 1, GH_EINVAL,
                      "line 1: field \"volatile\": missing");
    expect_decode_err(SIG("\"kind\":\"row_remap\",\"pending\":true,\"failure\":false,"
                          "\"correctable\":-2,\"uncorrectable\":0"),
                      1, GH_EINVAL, "line 1: field \"correctable\": out of range");
    expect_decode_err(SIG("\"kind\":\"nvlink\",\"link\":2,\"count\":1"), 1,
                      GH_EINVAL, "line 1: field \"counter\": missing");
    expect_decode_err(SIG("\"kind\":\"pcie\",\"counter\":\"\",\"count\":1"), 1, GH_EINVAL,
                      "line 1: field \"counter\": empty");
    expect_decode_err(SIG("\"kind\":\"nic\",\"device\":\"mlx5_0\",\"port\":1,\"counter\":"
                          "\"link_downed\",\"count\":1,\"state\":\"sideways\""),
                      1, GH_EINVAL, "line 1: field \"state\": must be \"up\" or \"down\"");
    expect_decode_err(SIG("\"kind\":\"thermal\",\"celsius\":\"hot\",\"throttled\":true"), 1,
                      GH_EINVAL, "line 1: field \"celsius\": not a number");
    expect_decode_err(SIG("\"kind\":\"power\",\"watts\":-1,\"throttled\":true"), 1, GH_EINVAL,
                      "line 1: field \"watts\": out of range");
    expect_decode_err(SIG("\"kind\":\"step\",\"job\":\"j\",\"rank\":0,\"step\":1,\"step_ms\":1,"
                          "\"loss\":\"foo\""),
                      1, GH_EINVAL,
                      "line 1: field \"loss\": not a number, null, \"nan\", \"inf\" or \"-inf\"");
    expect_decode_err(SIG("\"kind\":\"step\",\"job\":\"j\",\"rank\":0,\"step\":1,\"step_ms\":1,"
                          "\"loss\":true"),
                      1, GH_EINVAL,
                      "line 1: field \"loss\": not a number, null, \"nan\", \"inf\" or \"-inf\"");
    expect_decode_err(SIG("\"kind\":\"step\",\"job\":\"j\",\"rank\":0,\"step\":1,\"step_ms\":1,"
                          "\"comm_ms\":-0.5"),
                      1, GH_EINVAL, "line 1: field \"comm_ms\": out of range");
    expect_decode_err(SIG("\"kind\":\"step\",\"job\":\"j\",\"rank\":0,\"step\":1"), 1, GH_EINVAL,
                      "line 1: field \"step_ms\": missing");
    expect_decode_err(SIG("\"kind\":\"checkpoint\",\"job\":\"j\",\"step\":1,\"path\":\"/p\","
                          "\"state\":\"ok\""),
                      1, GH_EINVAL, "line 1: field \"state\": must be \"saved\" or \"failed\"");
    expect_decode_err(SIG("\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":1,\"rank\":0,"
                          "\"replica\":0,\"value\":\"0xag\""),
                      1, GH_EINVAL, "line 1: field \"value\": not a hex string");
    expect_decode_err(SIG("\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"p\""), 1,
                      GH_EINVAL, "line 1: field \"reason\": missing");
    expect_decode_err(SIG("\"kind\":\"job_finished\",\"job\":\"ml/j\",\"state\":\"done\""), 1,
                      GH_EINVAL, "line 1: field \"state\": must be \"complete\" or \"failed\"");
    expect_decode_err(SIG("\"kind\":\"job_finished\",\"state\":\"complete\""), 1, GH_EINVAL,
                      "line 1: field \"job\": missing");
    expect_decode_err(SIG("\"kind\":\"pod_succeeded\",\"namespace\":\"ml\""), 1, GH_EINVAL,
                      "line 1: field \"pod\": missing");
    expect_decode_err(SIG("\"kind\":\"pod_failed\",\"namespace\":\"ml\",\"pod\":\"p\",\"reason\":"
                          "\"Error\",\"exit_code\":4294967296"),
                      1, GH_EINVAL, "line 1: field \"exit_code\": out of range");
    expect_decode_err(SIG("\"kind\":\"probe_result\",\"check\":\"x\""), 1, GH_EINVAL,
                      "line 1: field \"passed\": missing");
    /* a scenario header is not a signal */
    expect_decode_err("{\"scenario\":\"s\",\"nodes\":[]}", 1, GH_EINVAL,
                      "line 1: a scenario header, not a signal");
}

static void test_decode_rules(void **state)
{
    (void)state;
    struct gh_signal s;

    /* unknown fields, and fields of other kinds, are ignored */
    decode_ok(SIG("\"kind\":\"xid\",\"code\":13,\"future\":{\"a\":[1,{\"b\":null}]},"
                  "\"count\":\"not even a number\",\"celsius\":[],\"node_labels\":{}"),
              &s);
    assert_int_equal(s.code, 13);
    assert_false(s.has_count);
    char *out = encode_ok(&s);
    assert_string_equal(out, "{\"ts\":\"2026-11-29T07:00:00.000000Z\",\"node\":\"n\","
                             "\"source\":\"nvml\",\"kind\":\"xid\",\"code\":13}");
    free(out);
    gh_signal_clear(&s);

    /* a checksum may carry a 0x prefix; it is kept as written */
    decode_ok(SIG("\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":1,\"rank\":0,"
                  "\"replica\":0,\"value\":\"0xAB12\""),
              &s);
    assert_string_equal(s.value, "0xAB12");
    gh_signal_clear(&s);

    /* integral reals are integers; null is absent */
    decode_ok(SIG("\"kind\":\"xid\",\"code\":79.0,\"gpu\":2e0,\"pid\":null,\"process\":null,"
                  "\"msg\":null,\"injected\":false"),
              &s);
    assert_int_equal(s.code, 79);
    assert_int_equal(s.gpu, 2);
    assert_false(s.has_pid);
    assert_null(s.process);
    assert_null(s.msg);
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"gpu\":2,"));
    assert_non_null(strstr(out, "\"code\":79}"));
    free(out);
    gh_signal_clear(&s);
    decode_ok(SIG("\"kind\":\"pcie\",\"counter\":\"replay\",\"count\":9007199254740992.0"), &s);
    assert_int_equal(s.count, 9007199254740992LL);
    gh_signal_clear(&s);
    expect_decode_err(SIG("\"kind\":\"pcie\",\"counter\":\"replay\",\"count\":1.8e16"), 1,
                      GH_EINVAL, "line 1: field \"count\": not an integer");
    decode_ok(SIG("\"kind\":\"pcie\",\"counter\":\"replay\",\"count\":9223372036854775807"), &s);
    assert_int_equal(s.count, INT64_MAX);
    gh_signal_clear(&s);

    /* numbers may be integers; celsius may be negative */
    decode_ok(SIG("\"kind\":\"thermal\",\"celsius\":-5,\"throttled\":false"), &s);
    assert_true(s.celsius == -5.0);
    gh_signal_clear(&s);

    /* loss: null, and the non-finite strings in any case */
    static const struct {
        const char *loss;
        bool has;
        double v;
    } losses[] = {
        {"null", false, 0},  {"\"nan\"", true, NAN},   {"\"NaN\"", true, NAN},
        {"\"inf\"", true, INFINITY}, {"\"INF\"", true, INFINITY}, {"\"-Inf\"", true, -INFINITY},
        {"-2", true, -2.0},  {"0.125", true, 0.125},
    };
    for (size_t i = 0; i < sizeof losses / sizeof losses[0]; i++) {
        char line[256];
        snprintf(line, sizeof line,
                 "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"telemetry\",\"kind\":\"step\","
                 "\"job\":\"j\",\"rank\":0,\"step\":1,\"step_ms\":1,\"loss\":%s}",
                 losses[i].loss);
        decode_ok(line, &s);
        assert_int_equal(s.has_loss, losses[i].has);
        if (losses[i].has)
            assert_true(dbl_eq(s.loss, losses[i].v));
        gh_signal_clear(&s);
    }
    for (const char *const *bad = (const char *const[]){"\"+inf\"", "\"infinity\"", "\"2.3\"",
                                                        "\"\"", NULL};
         *bad; bad++) {
        char line[256];
        snprintf(line, sizeof line,
                 "{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"telemetry\",\"kind\":\"step\","
                 "\"job\":\"j\",\"rank\":0,\"step\":1,\"step_ms\":1,\"loss\":%s}",
                 *bad);
        expect_decode_err(line, 1, GH_EINVAL,
                          "line 1: field \"loss\": not a number, null, \"nan\", \"inf\" or "
                          "\"-inf\"");
    }

    /* node: optional for telemetry and kube pods */
    decode_ok("{\"ts\":\"2026-11-29T07:00:00Z\",\"source\":\"kube\",\"kind\":\"pod_started\","
              "\"namespace\":\"a\",\"pod\":\"b\"}",
              &s);
    assert_null(s.node);
    gh_signal_clear(&s);

    /* ts: offsets normalised to Z, lowercase, no fraction, nanoseconds kept */
    decode_ok("{\"ts\":\"2026-11-29T09:00:00.5+02:00\",\"source\":\"kube\",\"kind\":"
              "\"node_ready\",\"node\":\"n\"}",
              &s);
    assert_int_equal(s.ts_ns, ts("2026-11-29T07:00:00.5Z"));
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"2026-11-29T07:00:00.500000Z\""));
    free(out);
    gh_signal_clear(&s);
    decode_ok("{\"ts\":\"2026-11-28t23:30:00.123456789-07:30\",\"source\":\"kube\",\"kind\":"
              "\"node_ready\",\"node\":\"n\"}",
              &s);
    assert_int_equal(s.ts_ns, ts("2026-11-29T07:00:00.123456789Z"));
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"2026-11-29T07:00:00.123456Z\""));
    free(out);
    gh_signal_clear(&s);

    /* the boundaries of the ts range */
    decode_ok("{\"ts\":\"1678-01-01T00:00:00Z\",\"source\":\"kube\",\"kind\":\"node_ready\","
              "\"node\":\"n\"}",
              &s);
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"1678-01-01T00:00:00.000000Z\""));
    free(out);
    gh_signal_clear(&s);
    decode_ok("{\"ts\":\"2261-12-31T23:59:59.999999999Z\",\"source\":\"kube\",\"kind\":"
              "\"node_ready\",\"node\":\"n\"}",
              &s);
    out = encode_ok(&s);
    assert_non_null(strstr(out, "\"ts\":\"2261-12-31T23:59:59.999999Z\""));
    free(out);
    gh_signal_clear(&s);

    /* decode_json from a built object, and a non-object */
    struct gh_err err;
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i}", "ts", "2026-11-29T07:00:00Z", "node", "n",
                          "source", "dcgm", "kind", "sxid", "code", 5);
    assert_non_null(o);
    assert_int_equal(gh_signal_decode_json(o, 0, &s, &err), GH_OK);
    assert_int_equal(s.code, 5);
    gh_signal_clear(&s);
    json_object_set_new(o, "switch", json_stringn("a\0b", 3));
    assert_int_equal(gh_signal_decode_json(o, 4, &s, &err), GH_EINVAL);
    assert_string_equal(err.msg, "line 4: field \"switch\": contains a NUL byte");
    json_decref(o);
    o = json_array();
    assert_int_equal(gh_signal_decode_json(o, 0, &s, &err), GH_EINVAL);
    assert_string_equal(err.msg, "not a JSON object");
    json_decref(o);

    /* text without a NUL after it, and the length cap */
    const char *two = SIG("\"kind\":\"gpu_lost\"") "garbage";
    assert_int_equal(gh_signal_decode(two, strlen(two) - 7, 1, &s, &err), GH_OK);
    gh_signal_clear(&s);
    assert_int_equal(gh_signal_decode(two, GH_SIGNAL_LINE_MAX + 1, 8, &s, &err), GH_EINVAL);
    assert_string_equal(err.msg, "line 8: longer than 65536 bytes");
}

/* ---- the reader ---------------------------------------------------------------- */

struct expect {
    int rc;
    long line;
    const char *text; /* GH_OK: the node name; header: "header"; else: the error */
};

static void run_reader(const char *data, size_t len, bool want_headers, const struct expect *ex,
                       size_t nex)
{
    FILE *f = fmemopen((void *)data, len, "r");
    assert_non_null(f);
    struct gh_signal_reader *r = gh_signal_reader_new(f);
    assert_non_null(r);
    for (size_t i = 0; i < nex; i++) {
        struct gh_signal s;
        json_t *hdr = (json_t *)&s; /* must be reset */
        struct gh_err err = {{0}};
        int rc = gh_signal_reader_next(r, &s, want_headers ? &hdr : NULL, &err);
        if (rc != ex[i].rc)
            fail_msg("read %zu: rc %d, want %d (%s)", i, rc, ex[i].rc, err.msg);
        if (rc == GH_OK && want_headers && hdr) {
            assert_string_equal(ex[i].text, "header");
            assert_true(json_is_object(hdr));
            json_decref(hdr);
        } else if (rc == GH_OK) {
            if (want_headers)
                assert_null(hdr);
            assert_string_equal(s.node, ex[i].text);
            gh_signal_clear(&s);
        } else {
            assert_string_equal(err.msg, ex[i].text);
            assert_null(s.node);
        }
        if (rc != GH_ENOTFOUND)
            assert_int_equal(gh_signal_reader_line(r), ex[i].line);
    }
    gh_signal_reader_free(r);
    fclose(f);
}

#define GOOD(node) "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"" node "\",\"source\":\"kube\",\"kind\":\"node_ready\"}"

static void test_reader_mixed(void **state)
{
    (void)state;
    /* an over-long line of valid JSON (so only the length is wrong) */
    size_t longlen = GH_SIGNAL_LINE_MAX + 100;
    char *longline = malloc(longlen + 1);
    assert_non_null(longline);
    int head = snprintf(longline, longlen, "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":\"long\","
                                           "\"source\":\"kube\",\"kind\":\"node_ready\",\"msg\":\"");
    memset(longline + head, 'x', longlen - (size_t)head - 2);
    memcpy(longline + longlen - 2, "\"}", 3);

    /* a line of exactly GH_SIGNAL_LINE_MAX bytes is fine */
    char *maxline = malloc(GH_SIGNAL_LINE_MAX + 1);
    assert_non_null(maxline);
    head = snprintf(maxline, GH_SIGNAL_LINE_MAX, "{\"ts\":\"2026-11-29T07:00:00Z\",\"node\":"
                                                 "\"max\",\"source\":\"kube\",\"kind\":"
                                                 "\"node_ready\",\"msg\":\"");
    memset(maxline + head, 'y', GH_SIGNAL_LINE_MAX - (size_t)head - 2);
    memcpy(maxline + GH_SIGNAL_LINE_MAX - 2, "\"}", 3);
    assert_int_equal(strlen(maxline), GH_SIGNAL_LINE_MAX);

    size_t cap = 4 * GH_SIGNAL_LINE_MAX;
    char *data = malloc(cap);
    assert_non_null(data);
    size_t n = 0;
#define ADD(str) (memcpy(data + n, (str), strlen(str)), n += strlen(str))
    ADD("\xEF\xBB\xBF{\"scenario\":\"t\",\"nodes\":[\"a\"]}\n"); /* 1: header, with a BOM */
    ADD(GOOD("a") "\n");                                        /* 2 */
    ADD("\n");                                                  /* 3: blank */
    ADD("  \t\r\n");                                            /* 4: blank */
    ADD("{\"ts\":\n");                                          /* 5: bad JSON */
    ADD(longline);                                              /* 6: too long */
    ADD("\n");
    ADD(GOOD("b") "\n");                                        /* 7 */
    ADD("[1]\n");                                               /* 8: not an object */
    ADD(SIG("\"kind\":\"xid\"") "\n");                          /* 9: missing code */
    ADD(GOOD("c") "\r\n");                                      /* 10: CRLF */
    ADD(maxline);                                               /* 11: exactly the cap */
    ADD("\n");
    ADD("\xEF\xBB\xBF" GOOD("bom-not-first") "\n");             /* 12: a BOM is only skipped on line 1 */
    ADD("{\"scenario\":\"again\"}\n");                          /* 13: a second header */
    ADD(GOOD("d"));                                             /* 14: no final newline */
#undef ADD
    const struct expect ex[] = {
        {GH_OK, 1, "header"},
        {GH_OK, 2, "a"},
        {GH_EINVAL, 5, "line 5: invalid JSON at column 6: unexpected token near end of file"},
        {GH_EINVAL, 6, "line 6: longer than 65536 bytes"},
        {GH_OK, 7, "b"},
        {GH_EINVAL, 8, "line 8: not a JSON object"},
        {GH_EINVAL, 9, "line 9: field \"code\": missing"},
        {GH_OK, 10, "c"},
        {GH_OK, 11, "max"},
        {GH_EINVAL, 12, "line 12: invalid JSON at column 1: invalid token near '\?\?\?'"},
        {GH_OK, 13, "header"},
        {GH_OK, 14, "d"},
        {GH_ENOTFOUND, 0, "end of input"},
        {GH_ENOTFOUND, 0, "end of input"},
    };
    run_reader(data, n, true, ex, sizeof ex / sizeof ex[0]);

    /* header == NULL: a header line is an error like any other */
    const char hdr_only[] = "{\"scenario\":\"t\"}\n" GOOD("z") "\n";
    const struct expect ex2[] = {
        {GH_EINVAL, 1, "line 1: a scenario header, not a signal"},
        {GH_OK, 2, "z"},
        {GH_ENOTFOUND, 0, "end of input"},
    };
    run_reader(hdr_only, sizeof hdr_only - 1, false, ex2, 3);

    /* an over-long last line without a newline, then nothing */
    const struct expect ex3[] = {
        {GH_EINVAL, 1, "line 1: longer than 65536 bytes"},
        {GH_ENOTFOUND, 0, "end of input"},
    };
    run_reader(longline, longlen, false, ex3, 2);

    /* empty input; only blank lines */
    const struct expect ex4[] = {{GH_ENOTFOUND, 0, "end of input"}};
    run_reader("", 0, true, ex4, 1);
    run_reader("\n\n \n\r\n", 6, true, ex4, 1);

    free(data);
    free(maxline);
    free(longline);
}

static void test_reader_roundtrip_file(void **state)
{
    (void)state;
    /* every built kind written with gh_signal_write reads back equal */
    char *buf = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&buf, &len);
    assert_non_null(w);
    struct gh_err err;
    for (int k = 0; k < GH_KIND__COUNT; k++) {
        struct gh_signal s;
        build(&s, (enum gh_kind)k);
        assert_int_equal(gh_signal_write(w, &s, &err), GH_OK);
        gh_signal_clear(&s);
    }
    assert_int_equal(fclose(w), 0);
    FILE *f = fmemopen(buf, len, "r");
    assert_non_null(f);
    struct gh_signal_reader *r = gh_signal_reader_new(f);
    for (int k = 0; k < GH_KIND__COUNT; k++) {
        struct gh_signal a, b;
        assert_int_equal(gh_signal_reader_next(r, &b, NULL, &err), GH_OK);
        assert_int_equal(gh_signal_reader_line(r), k + 1);
        build(&a, (enum gh_kind)k);
        assert_true(sig_eq(&a, &b));
        gh_signal_clear(&a);
        gh_signal_clear(&b);
    }
    struct gh_signal s;
    assert_int_equal(gh_signal_reader_next(r, &s, NULL, &err), GH_ENOTFOUND);
    gh_signal_reader_free(r);
    gh_signal_reader_free(NULL);
    fclose(f);
    free(buf);
}

/* ---- out of memory inside jansson ---------------------------------------------- */

static long alloc_budget = -1; /* allocations left before failing; -1 = unlimited */

static void *failing_malloc(size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

static void test_jansson_oom(void **state)
{
    (void)state;
    json_malloc_t old_malloc;
    json_free_t old_free;
    json_get_alloc_funcs(&old_malloc, &old_free);
    json_set_alloc_funcs(failing_malloc, free);
    for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++) {
        bool decoded = false, encoded = false;
        for (long budget = 0; budget < 1000 && !(decoded && encoded); budget++) {
            struct gh_signal s;
            struct gh_err err;
            alloc_budget = budget;
            int rc = gh_signal_decode(canonical[i], strlen(canonical[i]), 1, &s, &err);
            if (rc) {
                /* jansson reports some allocation failures as syntax errors */
                if (rc != GH_EINVAL)
                    assert_int_equal(rc, GH_ENOMEM);
                assert_null(s.node);
                continue;
            }
            decoded = true;
            alloc_budget = budget;
            char *out = NULL;
            rc = gh_signal_encode(&s, &out, &err);
            if (rc) {
                assert_int_equal(rc, GH_ENOMEM);
                assert_null(out);
            } else {
                encoded = true;
                assert_string_equal(out, canonical[i]);
            }
            free(out);
            gh_signal_clear(&s);
        }
        assert_true(decoded && encoded);
    }
    alloc_budget = -1;
    json_set_alloc_funcs(old_malloc, old_free);
}

/* ---- the time module ----------------------------------------------------------- */

static void expect_time(const char *in, const char *out_want)
{
    int64_t ns;
    char buf[GH_RFC3339_MAX];
    if (!gh_time_parse_rfc3339(in, strlen(in), &ns))
        fail_msg("%s did not parse", in);
    assert_string_equal(gh_time_format_rfc3339(ns, buf, sizeof buf), out_want);
}

static void expect_no_time(const char *in)
{
    int64_t ns;
    if (gh_time_parse_rfc3339(in, strlen(in), &ns))
        fail_msg("%s parsed", in);
}

static void test_time(void **state)
{
    (void)state;
    char buf[GH_RFC3339_MAX];
    assert_string_equal(gh_time_format_rfc3339(0, buf, sizeof buf), "1970-01-01T00:00:00.000000Z");
    assert_string_equal(gh_time_format_rfc3339(1, buf, sizeof buf), "1970-01-01T00:00:00.000000Z");
    assert_string_equal(gh_time_format_rfc3339(1999, buf, sizeof buf),
                        "1970-01-01T00:00:00.000001Z");
    assert_string_equal(gh_time_format_rfc3339(-1, buf, sizeof buf),
                        "1969-12-31T23:59:59.999999Z");
    assert_string_equal(gh_time_format_rfc3339(INT64_MAX, buf, sizeof buf),
                        "2262-04-11T23:47:16.854775Z");

    expect_time("2026-11-29T07:00:00.123456Z", "2026-11-29T07:00:00.123456Z");
    expect_time("2026-11-29T07:00:00.1234567891234Z", "2026-11-29T07:00:00.123456Z");
    expect_time("2026-11-29 07:00:00z", "2026-11-29T07:00:00.000000Z");
    /* leap years */
    expect_time("2024-02-29T12:00:00Z", "2024-02-29T12:00:00.000000Z");
    expect_time("2000-02-29T12:00:00Z", "2000-02-29T12:00:00.000000Z");
    expect_no_time("2023-02-29T12:00:00Z");
    expect_no_time("2100-02-29T12:00:00Z");
    expect_time("2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00.000000Z");
    expect_time("2023-03-01T00:30:00+01:00", "2023-02-28T23:30:00.000000Z");
    expect_time("2024-12-31T23:59:59.999999+00:00", "2024-12-31T23:59:59.999999Z");
    expect_time("2024-12-31T23:00:00-01:00", "2025-01-01T00:00:00.000000Z");
    expect_time("2026-06-30T05:30:00+05:30", "2026-06-30T00:00:00.000000Z");
    /* a leap second folds onto the last instant of its second */
    expect_time("2016-12-31T23:59:60Z", "2016-12-31T23:59:59.999999Z");
    /* days since the epoch */
    assert_int_equal(gh_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(gh_days_from_civil(2000, 3, 1), 11017);
    assert_int_equal(gh_days_from_civil(2024, 2, 29) + 1, gh_days_from_civil(2024, 3, 1));
    /* malformed */
    expect_no_time("");
    expect_no_time("2026-11-29T07:00:00");
    expect_no_time("2026-11-29T07:00:00.Z");
    expect_no_time("2026-11-29T07:00:00Zjunk");
    expect_no_time("2026-11-29T24:00:00Z");
    expect_no_time("2026-13-01T00:00:00Z");
    expect_no_time("2026-00-01T00:00:00Z");
    expect_no_time("2026-04-31T00:00:00Z");
    expect_no_time("2026-11-29T07:00:00+2:00");
    expect_no_time("2026-11-29T07:00:00+24:00");
    expect_no_time("2026-11-29X07:00:00Z");
    expect_no_time("26-11-29T07:00:00Z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_examples),
        cmocka_unit_test(test_canonical_every_kind),
        cmocka_unit_test(test_built_every_kind),
        cmocka_unit_test(test_encode_format),
        cmocka_unit_test(test_encode_refuses_invalid),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_decode_rules),
        cmocka_unit_test(test_reader_mixed),
        cmocka_unit_test(test_reader_roundtrip_file),
        cmocka_unit_test(test_jansson_oom),
        cmocka_unit_test(test_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
