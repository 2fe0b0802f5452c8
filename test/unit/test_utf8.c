/* test_utf8.c - the one UTF-8 rule (common/utf8.h): each boundary of RFC
 * 3629 (the shortest and longest form of each length, overlongs, surrogates,
 * above U+10FFFF, truncated and broken sequences) judged the same way by
 * gh_utf8_seq and gh_utf8_valid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "common/utf8.h"

struct seq_case {
    const char *bytes;
    size_t n;
    size_t want; /* gh_utf8_seq's answer */
};

static void test_seq(void **state)
{
    (void)state;
    static const struct seq_case cases[] = {
        {"\x00", 1, 1},                 {"A", 1, 1},
        {"\x7F", 1, 1},                 {"\x80", 1, 0}, /* lone continuation */
        {"\xC0\x80", 2, 0},             {"\xC1\xBF", 2, 0}, /* overlong 2-byte */
        {"\xC2\x80", 2, 2},             {"\xDF\xBF", 2, 2},
        {"\xC2", 1, 0},                 {"\xC2\x41", 2, 0}, /* truncated, broken */
        {"\xE0\x9F\xBF", 3, 0},         {"\xE0\xA0\x80", 3, 3}, /* overlong, U+0800 */
        {"\xED\x9F\xBF", 3, 3},         {"\xED\xA0\x80", 3, 0}, /* U+D7FF, U+D800 */
        {"\xED\xBF\xBF", 3, 0},         {"\xEE\x80\x80", 3, 3}, /* U+DFFF, U+E000 */
        {"\xEF\xBF\xBD", 3, 3},         {"\xEF\xBF", 2, 0},
        {"\xF0\x8F\xBF\xBF", 4, 0},     {"\xF0\x90\x80\x80", 4, 4}, /* overlong, U+10000 */
        {"\xF4\x8F\xBF\xBF", 4, 4},     {"\xF4\x90\x80\x80", 4, 0}, /* U+10FFFF, above */
        {"\xF5\x80\x80\x80", 4, 0},     {"\xFF", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct seq_case *c = &cases[i];
        assert_int_equal(gh_utf8_seq(c->bytes, c->n), c->want);
        /* a string of that one sequence is valid exactly when it is whole */
        assert_int_equal(gh_utf8_valid(c->bytes, c->n), c->want == c->n);
    }
}

static void test_valid(void **state)
{
    (void)state;
    static const char ok[] = "GPU \xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 ok";
    assert_true(gh_utf8_valid(ok, strlen(ok)));
    assert_true(gh_utf8_valid("", 0));
    /* one bad byte anywhere refuses the string */
    static const char bad_mid[] = "abc\xC3(def";
    assert_false(gh_utf8_valid(bad_mid, strlen(bad_mid)));
    /* a sequence cut by len is refused although the bytes follow in memory */
    assert_false(gh_utf8_valid(ok, 5));
    assert_true(gh_utf8_valid(ok, 6));
    /* gh_utf8_seq measures only the first sequence */
    assert_int_equal(gh_utf8_seq("\xF0\x9F\x98\x80xyz", 7), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq),
        cmocka_unit_test(test_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
