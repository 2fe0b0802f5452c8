/* test_timeutil.c - unit tests of common/timeutil.h's civil-date pair:
 * gh_civil_from_days inverts gh_days_from_civil on every day from 1600 to
 * 2400 (leap centuries, the epoch, negative days), and known dates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/timeutil.h"

static void test_known_dates(void **st)
{
    (void)st;
    int64_t y;
    unsigned m, d;
    gh_civil_from_days(0, &y, &m, &d);
    assert_true(y == 1970 && m == 1 && d == 1);
    gh_civil_from_days(-1, &y, &m, &d);
    assert_true(y == 1969 && m == 12 && d == 31);
    gh_civil_from_days(11016, &y, &m, &d); /* 2000-02-29 */
    assert_true(y == 2000 && m == 2 && d == 29);
    gh_civil_from_days(20786, &y, &m, &d); /* 2026-11-29 */
    assert_true(y == 2026 && m == 11 && d == 29);
}

static void test_round_trip(void **st)
{
    (void)st;
    int64_t first = gh_days_from_civil(1600, 1, 1), last = gh_days_from_civil(2400, 12, 31);
    int64_t py = 1599;
    unsigned pm = 12, pd = 31;
    for (int64_t z = first; z <= last; z++) {
        int64_t y;
        unsigned m, d;
        gh_civil_from_days(z, &y, &m, &d);
        assert_int_equal(gh_days_from_civil(y, m, d), z);
        /* the next day after (py, pm, pd) */
        bool next_day = y == py && m == pm && d == pd + 1;
        bool next_month = y == py && m == pm + 1 && d == 1;
        bool next_year = y == py + 1 && m == 1 && d == 1 && pm == 12;
        assert_true(next_day || next_month || next_year);
        py = y, pm = m, pd = d;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_dates),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
