/* test_kube_watch.c - the watch-stream decoder: arbitrary chunking, several
 * events per chunk, bookmarks and ERROR events, bounds and malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/watch.h"

struct seen {
    int n;
    enum gh_kube_ev_type types[16];
    char names[16][32];
    int stop_at; /* return an error on this event (1-based), 0: never */
};

static int on_ev(void *ud, enum gh_kube_ev_type t, json_t *obj, struct gh_err *err)
{
    struct seen *s = ud;
    if (s->n < 16) {
        s->types[s->n] = t;
        const char *nm = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        snprintf(s->names[s->n], sizeof s->names[0], "%s", nm ? nm : "");
    }
    s->n++;
    if (s->stop_at && s->n == s->stop_at)
        return gh_err_set(err, GH_EAGAIN, "stop");
    return GH_OK;
}

static const char *stream =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\"},\"data\":\"braces } and { in \\\"strings\\\" ]\"}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"},\"list\":[{\"x\":[1,2]}]}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}\r\n  \n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";

static void check_all(const struct seen *s)
{
    assert_int_equal(s->n, 5);
    assert_int_equal(s->types[0], GH_KUBE_EV_ADDED);
    assert_string_equal(s->names[0], "a");
    assert_int_equal(s->types[1], GH_KUBE_EV_MODIFIED);
    assert_int_equal(s->types[2], GH_KUBE_EV_BOOKMARK);
    assert_int_equal(s->types[3], GH_KUBE_EV_DELETED);
    assert_string_equal(s->names[3], "c");
    assert_int_equal(s->types[4], GH_KUBE_EV_ERROR);
}

static void test_whole_stream(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gh_kube_watch_decoder *d;
    struct gh_err err;
    assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
    assert_int_equal(gh_kube_watch_decoder_feed(d, stream, strlen(stream), &err), GH_OK);
    assert_int_equal(gh_kube_watch_decoder_finish(d, &err), GH_OK);
    check_all(&s);
    assert_int_equal(gh_kube_watch_decoder_count(d), 5);
    gh_kube_watch_decoder_free(d);
}

static void test_every_split(void **state)
{
    (void)state;
    size_t len = strlen(stream);
    for (size_t chunk = 1; chunk <= 17; chunk++) {
        struct seen s = {0};
        struct gh_kube_watch_decoder *d;
        struct gh_err err;
        assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
        for (size_t i = 0; i < len; i += chunk) {
            size_t n = len - i < chunk ? len - i : chunk;
            assert_int_equal(gh_kube_watch_decoder_feed(d, stream + i, n, &err), GH_OK);
        }
        assert_int_equal(gh_kube_watch_decoder_finish(d, &err), GH_OK);
        check_all(&s);
        gh_kube_watch_decoder_free(d);
    }
}

static void test_partial_at_end(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gh_kube_watch_decoder *d;
    struct gh_err err;
    assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
    const char *part = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{";
    assert_int_equal(gh_kube_watch_decoder_feed(d, part, strlen(part), &err), GH_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(gh_kube_watch_decoder_finish(d, &err), GH_EINVAL);
    gh_kube_watch_decoder_reset(d);
    assert_int_equal(gh_kube_watch_decoder_finish(d, &err), GH_OK);
    gh_kube_watch_decoder_free(d);
}

static void test_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "x",                                                   /* garbage between events */
        "[1,2]",                                               /* not an object */
        "{\"type\":\"ADDED\"}",                                /* no object */
        "{\"type\":\"WHAT\",\"object\":{}}",                   /* unknown type */
        "{\"type\":1,\"object\":{}}",                          /* type not a string */
        "{\"type\":\"ADDED\",\"object\":[]}",                  /* object not an object */
        "{\"type\":\"ADDED\",\"object\":{\"a\":tru}}",         /* bad JSON */
        "{\"type\":\"ADDED\",\"object\":{\"a\":\"\\u0000\"}}", /* NUL is refused by jansson */
        "{]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct seen s = {0};
        struct gh_kube_watch_decoder *d;
        struct gh_err err;
        assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
        int rc = gh_kube_watch_decoder_feed(d, bad[i], strlen(bad[i]), &err);
        if (rc == GH_OK)
            rc = gh_kube_watch_decoder_finish(d, &err);
        if (rc != GH_EINVAL)
            fail_msg("case %zu: rc %d", i, rc);
        assert_int_equal(s.n, 0);
        gh_kube_watch_decoder_free(d);
    }
}

static void test_bounded(void **state)
{
    (void)state;
    struct seen s = {0};
    struct gh_kube_watch_decoder *d;
    struct gh_err err;
    assert_int_equal(gh_kube_watch_decoder_new(64, on_ev, &s, &d, &err), GH_OK);
    const char *small = "{\"type\":\"ADDED\",\"object\":{}}";
    assert_int_equal(gh_kube_watch_decoder_feed(d, small, strlen(small), &err), GH_OK);
    assert_int_equal(s.n, 1);
    char big[200];
    snprintf(big, sizeof big, "{\"type\":\"ADDED\",\"object\":{\"x\":\"%0100d\"}}", 7);
    assert_int_equal(gh_kube_watch_decoder_feed(d, big, strlen(big), &err), GH_ELIMIT);
    gh_kube_watch_decoder_free(d);

    /* nesting is bounded too */
    assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
    char *deep = malloc(10000);
    memset(deep, '[', 10000);
    deep[0] = '{';
    assert_int_equal(gh_kube_watch_decoder_feed(d, deep, 10000, &err), GH_ELIMIT);
    free(deep);
    gh_kube_watch_decoder_free(d);
}

static void test_callback_stops(void **state)
{
    (void)state;
    struct seen s = {.stop_at = 2};
    struct gh_kube_watch_decoder *d;
    struct gh_err err;
    assert_int_equal(gh_kube_watch_decoder_new(0, on_ev, &s, &d, &err), GH_OK);
    assert_int_equal(gh_kube_watch_decoder_feed(d, stream, strlen(stream), &err), GH_EAGAIN);
    assert_string_equal(err.msg, "stop");
    assert_int_equal(s.n, 2);
    gh_kube_watch_decoder_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_stream),  cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_partial_at_end), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bounded),       cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests_name("kube_watch", tests, NULL, NULL);
}
