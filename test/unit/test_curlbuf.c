/* test_curlbuf.c - the capped reply body (common/curlbuf.h): bytes kept
 * NUL-terminated across chunks and buffer growth; a chunk past the cap
 * either aborts the transfer (returns 0) or is dropped while the transfer
 * goes on, and says so in over; exactly max bytes fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/curlbuf.h"

static void test_chunks_grow(void **state)
{
    (void)state;
    struct gh_curlbuf b = {.max = 100000};
    char chunk[7000];
    memset(chunk, 'a', sizeof chunk);
    size_t total = 0;
    for (int i = 0; i < 14; i++) { /* 98,000 bytes: past the first 16 KiB several times */
        chunk[0] = (char)('A' + i);
        assert_int_equal(gh_curlbuf_write(chunk, 1, sizeof chunk, &b), sizeof chunk);
        total += sizeof chunk;
    }
    assert_int_equal(b.len, total);
    assert_true(b.cap >= total + 1 && b.cap <= b.max + 1);
    assert_int_equal(b.p[total], '\0');
    assert_int_equal(b.p[7000 * 13], 'N');
    assert_false(b.over);
    free(b.p);
}

static void test_cap_abort(void **state)
{
    (void)state;
    struct gh_curlbuf b = {.max = 10};
    assert_int_equal(gh_curlbuf_append(&b, "0123456789", 10), 10); /* exactly max */
    assert_string_equal(b.p, "0123456789");
    assert_int_equal(b.cap, 11);
    assert_false(b.over);
    assert_int_equal(gh_curlbuf_append(&b, "x", 1), 0); /* one past: abort */
    assert_true(b.over);
    assert_false(b.nomem);
    assert_int_equal(b.len, 10);
    free(b.p);
}

static void test_cap_drop(void **state)
{
    (void)state;
    struct gh_curlbuf b = {.max = 8, .drop_excess = true};
    assert_int_equal(gh_curlbuf_write("abcdef", 2, 3, &b), 6);
    assert_int_equal(gh_curlbuf_write("ghijk", 1, 5, &b), 5); /* dropped, not an abort */
    assert_true(b.over);
    assert_string_equal(b.p, "abcdef");
    assert_int_equal(gh_curlbuf_write("gh", 1, 2, &b), 2); /* a chunk that fits is still kept */
    assert_string_equal(b.p, "abcdefgh");
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks_grow),
        cmocka_unit_test(test_cap_abort),
        cmocka_unit_test(test_cap_drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
