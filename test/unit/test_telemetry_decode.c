/* test_telemetry_decode.c - unit tests of the fast telemetry decoder
 * (signal/signal_fast.h): valid step, checkpoint and replica_checksum lines
 * are decoded on the fast path with every field as gh_signal_decode gives
 * it; every kind of bad line is handed back (GH_EAGAIN) and then rejected
 * with gh_signal_decode's exact message; escapes, big and negative numbers,
 * NaN/Infinity literals, loss null and exotic whitespace. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "signal/signal_fast.h"
#include "signal/signal_json.h"

#define TS "\"ts\":\"2026-11-29T07:00:01.123456Z\""
#define TEL "\"source\":\"telemetry\""
#define STEP_HEAD "{" TS "," TEL ",\"kind\":\"step\""

/* Decodes line[0..len) on the fast path (must be taken) and with
 * gh_signal_decode; both must encode the same. Returns the fast result
 * (caller clears). */
static struct gh_signal fast_ok_len(const char *line, size_t len)
{
    struct gh_signal fast, ref;
    struct gh_err err = {{0}};
    char *a = NULL, *b = NULL;
    if (gh_signal_fast_try(line, len, &fast) != GH_OK)
        fail_msg("fast path did not take: %.*s", (int)(len > 300 ? 300 : len), line);
    if (gh_signal_decode(line, len, 1, &ref, &err) != GH_OK)
        fail_msg("reference rejects: %.*s: %s", (int)(len > 300 ? 300 : len), line, err.msg);
    assert_int_equal(gh_signal_encode(&fast, &a, &err), GH_OK);
    assert_int_equal(gh_signal_encode(&ref, &b, &err), GH_OK);
    assert_string_equal(a, b);
    free(a);
    free(b);
    gh_signal_clear(&ref);
    return fast;
}

static struct gh_signal fast_ok(const char *line)
{
    return fast_ok_len(line, strlen(line));
}

/* line is handed back by the fast path, and the full decoder rejects it
 * with exactly `want` (or, when prefix, a message starting with it). */
static void rejected(const char *line, size_t len, const char *want, bool prefix)
{
    struct gh_signal s;
    struct gh_err e1 = {{0}}, e2 = {{0}};
    assert_int_equal(gh_signal_fast_try(line, len, &s), GH_EAGAIN);
    assert_null(s.job);
    assert_int_equal(gh_signal_fast_decode(line, len, 4, &s, &e1), GH_EINVAL);
    assert_int_equal(gh_signal_decode(line, len, 4, &s, &e2), GH_EINVAL);
    assert_string_equal(e1.msg, e2.msg);
    if (prefix) {
        if (strncmp(e1.msg, want, strlen(want)) != 0)
            fail_msg("got \"%s\", want a message starting \"%s\"", e1.msg, want);
    } else {
        assert_string_equal(e1.msg, want);
    }
}

static void rejected_s(const char *line, const char *want)
{
    rejected(line, strlen(line), want, false);
}

static void test_valid_kinds(void **state)
{
    (void)state;
    struct gh_signal s = fast_ok(STEP_HEAD ",\"node\":\"gpu-03\",\"gpu\":3,\"job\":\"ml/llm-70b\","
                                           "\"rank\":17,\"step\":1200,\"step_ms\":1432.5,"
                                           "\"comm_ms\":210.1,\"loss\":2.31,\"tokens_per_s\":51234,"
                                           "\"id\":\"a-1\",\"injected\":true}");
    assert_int_equal(s.kind, GH_KIND_STEP);
    assert_int_equal(s.source, GH_SRC_TELEMETRY);
    assert_string_equal(s.node, "gpu-03");
    assert_int_equal(s.gpu, 3);
    assert_string_equal(s.job, "ml/llm-70b");
    assert_true(s.has_rank && s.rank == 17);
    assert_true(s.has_step && s.step == 1200);
    assert_true(s.step_ms == 1432.5);
    assert_true(s.has_comm_ms && s.comm_ms == 210.1);
    assert_true(s.has_loss && s.loss == 2.31);
    assert_true(s.has_tokens_per_s && s.tokens_per_s == 51234);
    assert_string_equal(s.id, "a-1");
    assert_true(s.injected);
    assert_true(s.ts_ns == 1795935601123456000LL);
    gh_signal_clear(&s);

    s = fast_ok("{" TS "," TEL ",\"kind\":\"checkpoint\",\"job\":\"ml/x\",\"step\":1000,"
                "\"path\":\"s3://ckpt/x/step-1000\",\"state\":\"failed\",\"msg\":\"disk full\"}");
    assert_int_equal(s.kind, GH_KIND_CHECKPOINT);
    assert_int_equal(s.ckpt_state, GH_CKPT_FAILED);
    assert_string_equal(s.path, "s3://ckpt/x/step-1000");
    assert_string_equal(s.msg, "disk full");
    assert_null(s.node);
    assert_int_equal(s.gpu, -1);
    gh_signal_clear(&s);

    s = fast_ok("{" TS "," TEL ",\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":5,"
                "\"rank\":2,\"replica\":1,\"value\":\"9f3a0CdeadBEEF\"}");
    assert_int_equal(s.kind, GH_KIND_REPLICA_CHECKSUM);
    assert_int_equal(s.replica, 1);
    assert_string_equal(s.value, "9f3a0CdeadBEEF");
    gh_signal_clear(&s);

    /* key order does not matter; fields of other kinds and unknown fields,
     * nested objects and arrays included, are ignored */
    s = fast_ok("{\"step_ms\":3,\"extra\":{\"a\":[1,2.5,{\"b\":null,\"c\":[true,false]}],"
                "\"a2\":\"x\"},\"code\":\"not-an-int\",\"path\":7,\"rank\":1,\"job\":\"j\","
                "\"more\":[[],{}],\"step\":2,\"kind\":\"step\"," TEL "," TS "}");
    assert_int_equal(s.rank, 1);
    assert_null(s.path);
    gh_signal_clear(&s);
}

static void test_errors(void **state)
{
    (void)state;
    rejected_s(STEP_HEAD ",\"rank\":1,\"step\":2,\"step_ms\":3}", "line 4: field \"job\": missing");
    rejected_s(STEP_HEAD ",\"job\":\"\",\"rank\":1,\"step\":2,\"step_ms\":3}",
               "line 4: field \"job\": empty");
    rejected_s(STEP_HEAD ",\"job\":7,\"rank\":1,\"step\":2,\"step_ms\":3}",
               "line 4: field \"job\": not a string");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"step\":2,\"step_ms\":3}", "line 4: field \"rank\": missing");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1.5,\"step\":2,\"step_ms\":3}",
               "line 4: field \"rank\": not an integer");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":2147483648,\"step\":2,\"step_ms\":3}",
               "line 4: field \"rank\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":-1,\"step_ms\":3}",
               "line 4: field \"step\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":-3}",
               "line 4: field \"step_ms\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":\"3\"}",
               "line 4: field \"step_ms\": not a number");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2}", "line 4: field \"step_ms\": missing");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"comm_ms\":-1}",
               "line 4: field \"comm_ms\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":\"big\"}",
               "line 4: field \"loss\": not a number, null, \"nan\", \"inf\" or \"-inf\"");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"tokens_per_s\":true}",
               "line 4: field \"tokens_per_s\": not a number");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"gpu\":-1}",
               "line 4: field \"gpu\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"node\":[]}",
               "line 4: field \"node\": not a string");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"injected\":1}",
               "line 4: field \"injected\": not a boolean");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"msg\":{}}",
               "line 4: field \"msg\": not a string");
    rejected_s("{\"ts\":\"2026-11-29 07:00:01\"," TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,"
               "\"step\":2,\"step_ms\":3}",
               "line 4: field \"ts\": not RFC 3339");
    rejected_s("{\"ts\":\"2262-11-29T07:00:01Z\"," TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,"
               "\"step\":2,\"step_ms\":3}",
               "line 4: field \"ts\": out of range");
    rejected_s("{" TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3}",
               "line 4: field \"ts\": missing");
    rejected_s("{" TS ",\"source\":\"telemetr\",\"kind\":\"step\"}",
               "line 4: field \"source\": unknown source \"telemetr\"");
    rejected_s("{" TS "," TEL ",\"kind\":\"steps\"}", "line 4: field \"kind\": unknown kind \"steps\"");
    rejected_s("{" TS "," TEL ",\"kind\":null}", "line 4: field \"kind\": missing");
    rejected_s("{" TS "," TEL ",\"kind\":\"checkpoint\",\"job\":\"j\",\"step\":1,\"path\":\"p\","
               "\"state\":\"Saved\"}",
               "line 4: field \"state\": must be \"saved\" or \"failed\"");
    rejected_s("{" TS "," TEL ",\"kind\":\"checkpoint\",\"job\":\"j\",\"step\":1,\"path\":\"\","
               "\"state\":\"saved\"}",
               "line 4: field \"path\": empty");
    rejected_s("{" TS "," TEL ",\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":1,\"rank\":1,"
               "\"replica\":1,\"value\":\"xyz\"}",
               "line 4: field \"value\": not a hex string");
    rejected_s("{" TS "," TEL ",\"kind\":\"replica_checksum\",\"job\":\"j\",\"step\":1,\"rank\":1,"
               "\"value\":\"ab\"}",
               "line 4: field \"replica\": missing");
    rejected_s("{\"scenario\":\"x\"}", "line 4: a scenario header, not a signal");
    rejected_s("[1,2]", "line 4: not a JSON object");
    rejected_s("42", "line 4: not a JSON object");
    /* lines the fast path does not take even when valid go to the full decoder */
    struct gh_signal s;
    struct gh_err err = {{0}};
    const char *xid = "{" TS ",\"node\":\"n\",\"source\":\"kmsg\",\"kind\":\"xid\",\"code\":79}";
    assert_int_equal(gh_signal_fast_try(xid, strlen(xid), &s), GH_EAGAIN);
    assert_int_equal(gh_signal_fast_decode(xid, strlen(xid), 1, &s, &err), GH_OK);
    assert_int_equal(s.kind, GH_KIND_XID);
    assert_int_equal(s.code, 79);
    gh_signal_clear(&s);
}

static void test_json_errors(void **state)
{
    (void)state;
    /* duplicate keys, at the top and nested under an unknown field */
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"rank\":1}",
               "line 4: invalid JSON at column 117: duplicate object key near '\"rank\"'");
    const char *nested = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,"
                                   "\"x\":[{\"a\":1,\"b\":{},\"a\":2}]}";
    rejected(nested, strlen(nested), "line 4: invalid JSON at column", true);
    const char *dupx = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":1,\"x\":2}";
    rejected(dupx, strlen(dupx), "line 4: invalid JSON at column", true);
    const char *dupesc = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":1,\"\\u0078\":2}";
    rejected(dupesc, strlen(dupesc), "line 4: invalid JSON at column", true);
    /* the same key in two different objects is fine */
    struct gh_signal s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,"
                                           "\"x\":{\"a\":1},\"y\":{\"a\":{\"a\":1}}}");
    gh_signal_clear(&s);
    /* NaN and Infinity are not JSON */
    const char *nan = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":NaN}";
    rejected(nan, strlen(nan), "line 4: invalid JSON at column", true);
    const char *inf = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":Infinity}";
    rejected(inf, strlen(inf), "line 4: invalid JSON at column", true);
    const char *minf = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":-Infinity}";
    rejected(minf, strlen(minf), "line 4: invalid JSON at column", true);
    /* syntax */
    const char *trail = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,}";
    rejected(trail, strlen(trail), "line 4: invalid JSON", true);
    const char *two = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3} {}";
    rejected(two, strlen(two), "line 4: invalid JSON", true);
    /* an unterminated string after the value: yajl 2.1 alone accepts it
     * (found by fuzz_telemetry_decode) */
    const char *open_str = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3}\"{t";
    rejected(open_str, strlen(open_str), "line 4: invalid JSON", true);
    const char *close_str = STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3}\"}";
    rejected(close_str, strlen(close_str), "line 4: invalid JSON", true);
    struct gh_signal ws = fast_ok(STEP_HEAD ",\"job\":\"j}\\\"{\",\"rank\":1,\"step\":2,\"step_ms\":3} \t\r\n");
    assert_string_equal(ws.job, "j}\"{");
    gh_signal_clear(&ws);
    rejected("", 0, "line 4: invalid JSON", true);
    rejected("{\"a\":01}", 8, "line 4: invalid JSON", true);
}

static void test_strings(void **state)
{
    (void)state;
    /* \" \\ \/ \n and \u escapes in a job name, escaped keys */
    struct gh_signal s = fast_ok(STEP_HEAD ",\"job\":\"ml/\\\"quoted\\\"-\\u00e9\\u4e2d\\/x\\\\y\\n\","
                                           "\"rank\":1,\"st\\u0065p\":2,\"step_ms\":3,"
                                           "\"node\":\"n\\u0041\"}");
    assert_string_equal(s.job, "ml/\"quoted\"-\xc3\xa9\xe4\xb8\xad/x\\y\n");
    assert_string_equal(s.node, "nA");
    assert_int_equal(s.step, 2);
    gh_signal_clear(&s);
    /* raw UTF-8 */
    s = fast_ok(STEP_HEAD ",\"job\":\"r\xc3\xa9sum\xc3\xa9-\xf0\x9f\x98\x80\",\"rank\":1,\"step\":2,"
                          "\"step_ms\":3}");
    assert_string_equal(s.job, "r\xc3\xa9sum\xc3\xa9-\xf0\x9f\x98\x80");
    gh_signal_clear(&s);
    /* a surrogate pair is valid but left to the full decoder */
    const char *pair = STEP_HEAD ",\"job\":\"\\ud83d\\ude00\",\"rank\":1,\"step\":2,\"step_ms\":3}";
    struct gh_err err = {{0}};
    assert_int_equal(gh_signal_fast_try(pair, strlen(pair), &s), GH_EAGAIN);
    assert_int_equal(gh_signal_fast_decode(pair, strlen(pair), 1, &s, &err), GH_OK);
    assert_string_equal(s.job, "\xf0\x9f\x98\x80");
    gh_signal_clear(&s);
    /* bad surrogates, \u0000, overlong and surrogate UTF-8: invalid JSON */
    const char *bad[] = {
        STEP_HEAD ",\"job\":\"\\ud800\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"\\ud800\\u0041\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"\\udc00\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"j\\u0000\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\\u0000\":1}",
        STEP_HEAD ",\"job\":\"\xc0\x80\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"\xed\xa0\x80\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":\"\xf5\x80\x80\x80\"}",
        STEP_HEAD ",\"job\":\"j\\x\",\"rank\":1,\"step\":2,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"a\tb\",\"rank\":1,\"step\":2,\"step_ms\":3}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        rejected(bad[i], strlen(bad[i]), "line 4: invalid JSON", true);
    /* a NUL byte in the middle of the line */
    const char nul[] = STEP_HEAD ",\"job\":\"j\0\",\"rank\":1,\"step\":2,\"step_ms\":3}";
    rejected(nul, sizeof nul - 1, "line 4: invalid JSON", true);
}

static void test_numbers(void **state)
{
    (void)state;
    struct gh_signal s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":2147483647,"
                                           "\"step\":9223372036854775807,\"step_ms\":1e308,"
                                           "\"x\":-9223372036854775808,\"y\":1e-400}");
    assert_int_equal(s.rank, 2147483647);
    assert_true(s.step == INT64_MAX);
    assert_true(s.step_ms == 1e308);
    gh_signal_clear(&s);
    /* an integral real is an integer; -0 and -0.0 */
    s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":-0,\"step\":1200.0,\"step_ms\":-0.0,"
                          "\"comm_ms\":2E2,\"tokens_per_s\":12}");
    assert_int_equal(s.step, 1200);
    assert_int_equal(s.rank, 0);
    assert_true(s.step_ms == 0 && signbit(s.step_ms));
    assert_true(s.comm_ms == 200);
    assert_true(s.tokens_per_s == 12);
    gh_signal_clear(&s);
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":9007199254740994.0,\"step_ms\":3}",
               "line 4: field \"step\": not an integer");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":-1,\"step\":2,\"step_ms\":3}",
               "line 4: field \"rank\": out of range");
    rejected_s(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":-9223372036854775808,\"step_ms\":3}",
               "line 4: field \"step\": out of range");
    /* outside int64 or double: invalid JSON, even in an unknown field */
    const char *big[] = {
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":9223372036854775808,\"step_ms\":3}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":1e309}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":[99999999999999999999]}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":-9223372036854775809}",
        STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"x\":{\"y\":-1e999}}",
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        rejected(big[i], strlen(big[i]), "line 4: invalid JSON", true);
}

static void test_loss(void **state)
{
    (void)state;
    struct gh_signal s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,"
                                           "\"loss\":null,\"comm_ms\":null}");
    assert_false(s.has_loss);
    assert_false(s.has_comm_ms);
    gh_signal_clear(&s);
    s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":\"NaN\"}");
    assert_true(s.has_loss && isnan(s.loss));
    gh_signal_clear(&s);
    s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":\"-INF\"}");
    assert_true(s.has_loss && isinf(s.loss) && s.loss < 0);
    gh_signal_clear(&s);
    s = fast_ok(STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,\"step_ms\":3,\"loss\":-7}");
    assert_true(s.has_loss && s.loss == -7);
    gh_signal_clear(&s);
}

static void test_whitespace(void **state)
{
    (void)state;
    struct gh_signal s = fast_ok(" \t{ \"ts\" :\r\"2026-11-29T07:00:01Z\" ,\n\"source\"\t:\"telemetry\","
                                 "\"kind\":\"step\",\"job\":\"j\",\"rank\":1,\"step\":1,\"step_ms\":1 } \r");
    assert_int_equal(s.step, 1);
    gh_signal_clear(&s);
    /* \v and \f are not JSON whitespace (yajl takes them; jansson does not) */
    const char *vt = "{" TS ",\v" TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,\"step\":1,"
                     "\"step_ms\":1}";
    rejected(vt, strlen(vt), "line 4: invalid JSON", true);
    const char *ff = "{" TS "," TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,\"step\":1,"
                     "\"step_ms\":1}\f";
    rejected(ff, strlen(ff), "line 4: invalid JSON", true);
    const char *nbsp = "\xc2\xa0{" TS "," TEL ",\"kind\":\"step\",\"job\":\"j\",\"rank\":1,\"step\":1,"
                       "\"step_ms\":1}";
    rejected(nbsp, strlen(nbsp), "line 4: invalid JSON", true);
}

static void test_limits(void **state)
{
    (void)state;
    /* nesting deeper than the fast path keeps, and long lines: full decoder */
    char deep[512];
    int n = snprintf(deep, sizeof deep, "%s", STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,"
                                                       "\"step_ms\":3,\"x\":");
    for (int i = 0; i < 40; i++)
        deep[n++] = '[';
    for (int i = 0; i < 40; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    struct gh_signal s;
    struct gh_err err = {{0}};
    assert_int_equal(gh_signal_fast_try(deep, (size_t)n, &s), GH_EAGAIN);
    assert_int_equal(gh_signal_fast_decode(deep, (size_t)n, 1, &s, &err), GH_OK);
    assert_int_equal(s.step, 2);
    gh_signal_clear(&s);

    size_t cap = GH_SIGNAL_FAST_LINE_MAX + 200;
    char *longl = malloc(cap);
    assert_non_null(longl);
    int k = snprintf(longl, cap, "%s", STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,"
                                               "\"step_ms\":3,\"pad\":\"");
    memset(longl + k, 'x', GH_SIGNAL_FAST_LINE_MAX);
    memcpy(longl + k + GH_SIGNAL_FAST_LINE_MAX, "\"}", 2);
    size_t len = (size_t)k + GH_SIGNAL_FAST_LINE_MAX + 2;
    assert_int_equal(gh_signal_fast_try(longl, len, &s), GH_EAGAIN);
    assert_int_equal(gh_signal_fast_decode(longl, len, 1, &s, &err), GH_OK);
    gh_signal_clear(&s);
    /* just under the cap, with escapes that fill yajl's buffers */
    k = snprintf(longl, cap, "%s", STEP_HEAD ",\"job\":\"j\",\"rank\":1,\"step\":2,"
                                           "\"step_ms\":3,\"pad\":\"");
    size_t room = GH_SIGNAL_FAST_LINE_MAX - (size_t)k - 2;
    for (size_t i = 0; i + 2 <= room; i += 2)
        memcpy(longl + k + i, "\\n", 2);
    len = (size_t)k + (room & ~(size_t)1);
    memcpy(longl + len, "\"}", 2);
    len += 2;
    s = fast_ok_len(longl, len);
    gh_signal_clear(&s);
    free(longl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_kinds), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_json_errors), cmocka_unit_test(test_strings),
        cmocka_unit_test(test_numbers),     cmocka_unit_test(test_loss),
        cmocka_unit_test(test_whitespace),  cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
