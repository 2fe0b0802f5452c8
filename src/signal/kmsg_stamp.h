/* kmsg_stamp.h - decoding the time stamps that kernel-log text carries in
 * front of a message (for the kernel-log parser's wrapper decoding,
 * kmsg_wrap.h). Each function reads s[0..n) only and returns the bytes it
 * used (0: not that stamp), the time in UTC nanoseconds in *ns.
 *
 * Stamps without a zone are local time at zone->tz_s seconds east of UTC;
 * stamps without a year (syslog, dmesg -H) take zone->default_year, else
 * the year of zone->clock's now, one less when that puts the stamp more
 * than a day in the future (December lines read in January). Years outside
 * 1900..2200 are clamped (int64 nanoseconds reach 2262). */
#ifndef GH_SIGNAL_KMSG_STAMP_H
#define GH_SIGNAL_KMSG_STAMP_H

#include <stddef.h>
#include <stdint.h>

#include "common/timeutil.h"

/* What zone-less and year-less stamps mean (the parser's options). */
struct gh_kmsg_zone {
    const struct gh_clock *clock; /* borrowed; the year of year-less stamps */
    int default_year;             /* 0: from the clock */
    int32_t tz_s;                 /* offset of zone-less stamps, seconds east of UTC */
};

/* YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|+hh:mm|+hhmm]; no zone: tz_s. */
size_t gh_kmsg_stamp_iso(const char *s, size_t n, int32_t tz_s, int64_t *ns);
/* "Mmm dD HH:MM:SS[.frac]" (syslog), followed by a blank or the end. */
size_t gh_kmsg_stamp_syslog(const struct gh_kmsg_zone *z, const char *s, size_t n, int64_t *ns);
/* journalctl -o short-full: "Sun 2025-02-23 16:24:18[.frac] CET"; UTC/GMT/UT
 * name their offset, any other zone name is taken as z->tz_s. */
size_t gh_kmsg_stamp_weekday_iso(const struct gh_kmsg_zone *z, const char *s, size_t n,
                                 int64_t *ns);
/* journalctl -o short-unix: "1740327858.123456"; the caller checks that a
 * kernel tag follows. */
size_t gh_kmsg_stamp_epoch(const char *s, size_t n, int64_t *ns);
/* HH:MM:SS (a valid time of day); *h, *mi, *sec. */
size_t gh_kmsg_stamp_hms(const char *s, size_t n, long long *h, long long *mi, long long *sec);
/* [.,]digits: a fraction of a second in *ns (0 and returns 0 when none). */
size_t gh_kmsg_stamp_frac(const char *s, size_t n, int64_t *ns);

enum gh_kmsg_stamp_kind {
    GH_KMSG_ST_NONE,  /* not a stamp: the wrapper ends here */
    GH_KMSG_ST_WALL,  /* wall clock (*ns UTC) */
    GH_KMSG_ST_MONO,  /* seconds since boot (*ns since boot) */
    GH_KMSG_ST_OTHER, /* a stamp that gives no time (relative, caller id, "...") */
};
/* The inside of a [...] stamp (s[0..n) without the brackets). */
enum gh_kmsg_stamp_kind gh_kmsg_stamp_bracket(const struct gh_kmsg_zone *z, const char *s, size_t n,
                                              int64_t *ns);

#endif
