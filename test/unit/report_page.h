/* report_page.h - renders a report to a string and counts substrings in
 * it, for the report tests (test_report.c, test_report_store.c).
 * Header-only (static inline): each test binary includes it once, after
 * <cmocka.h>. */
#ifndef TEST_REPORT_PAGE_H
#define TEST_REPORT_PAGE_H

#include <stdio.h>
#include <string.h>
#include "report/html.h"
#include "report/report.h"

/* The report's HTML page; the caller owns (free) the string. */
static inline char *render(const struct gh_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    struct gh_err err = {{0}};
    int rc = gh_report_write_html(r, f, &err);
    fclose(f);
    if (rc)
        fail_msg("write_html: %s", err.msg);
    return buf;
}

/* How many times needle occurs in hay, without overlaps. */
static inline size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#endif
