/* timeutil.h - gpuheal's time: int64 nanoseconds since the Unix epoch, UTC,
 * RFC 3339 in and out, and the one injectable clock. */
#ifndef GH_COMMON_TIMEUTIL_H
#define GH_COMMON_TIMEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GH_NS_PER_S  1000000000LL
#define GH_NS_PER_MS 1000000LL
#define GH_NS_PER_US 1000LL

/* Longest RFC 3339 string we write: "2026-11-29T07:00:00.123456Z" + NUL. */
#define GH_RFC3339_MAX 40

/* Parses an RFC 3339 date-time with optional fraction (up to 9 digits) and a
 * "Z" or "+hh:mm"/"-hh:mm" offset into *ns (UTC). Accepts lowercase t/z and
 * a space between date and time. Returns false on anything else, including
 * out-of-range fields, years outside 1678..2261 (what int64 ns can hold) and
 * trailing bytes. */
bool gh_time_parse_rfc3339(const char *s, size_t len, int64_t *ns);

/* Writes ns as "YYYY-MM-DDTHH:MM:SS.ffffffZ" (microseconds, truncated toward
 * the past) into buf (at least GH_RFC3339_MAX bytes). Returns buf. */
char *gh_time_format_rfc3339(int64_t ns, char *buf, size_t cap);

/* Days since 1970-01-01 for a proleptic Gregorian date (month 1..12). */
int64_t gh_days_from_civil(int64_t y, unsigned m, unsigned d);
/* Its inverse: the civil date (proleptic Gregorian) of day z since 1970-01-01. */
void gh_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);

/* The injectable clock: production uses gh_clock_real(); tests and the
 * simulator pass their own. now() returns UTC nanoseconds. */
struct gh_clock {
    int64_t (*now)(void *ctx);
    void *ctx;
};

/* The real clock (CLOCK_REALTIME). The returned object is static and
 * immutable. */
const struct gh_clock *gh_clock_real(void);

static inline int64_t gh_clock_now(const struct gh_clock *c)
{
    return c->now(c->ctx);
}

#endif
