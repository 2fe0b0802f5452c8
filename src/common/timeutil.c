/* timeutil.c - RFC 3339 parsing/formatting on int64 nanoseconds, civil-date
 * arithmetic (no timegm/localtime: no locale, no TZ, no global state). */
#include "common/timeutil.h"

#include <stdio.h>
#include <time.h>

/* Howard Hinnant's days_from_civil: exact for the proleptic Gregorian calendar. */
int64_t gh_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

void gh_civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t yy = (int64_t)yoe + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

static bool digits(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return true;
}

static bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

bool gh_time_parse_rfc3339(const char *s, size_t len, int64_t *ns)
{
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned Y, M, D, h, mi, sec;
    if (len < 20)
        return false;
    if (!digits(s, 4, &Y) || s[4] != '-' || !digits(s + 5, 2, &M) || s[7] != '-' ||
        !digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) ||
        s[16] != ':' || !digits(s + 17, 2, &sec))
        return false;
    if (M < 1 || M > 12 || D < 1 || h > 23 || mi > 59 || sec > 60)
        return false;
    /* int64 nanoseconds span 1677-09-21 .. 2262-04-11: stay safely inside. */
    if (Y < 1678 || Y > 2261)
        return false;
    unsigned maxd = mdays[M - 1] + (M == 2 && leap(Y));
    if (D > maxd)
        return false;
    size_t i = 19;
    int64_t frac = 0;
    if (i < len && s[i] == '.') {
        i++;
        size_t start = i;
        int64_t scale = 100000000;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (i - start < 9) {
                frac += (s[i] - '0') * scale;
                scale /= 10;
            }
            i++;
        }
        if (i == start)
            return false;
    }
    if (i >= len)
        return false;
    int64_t offset_s = 0;
    if (s[i] == 'Z' || s[i] == 'z') {
        i++;
    } else if (s[i] == '+' || s[i] == '-') {
        unsigned oh, om;
        if (len - i < 6 || !digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
            !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return false;
        offset_s = (int64_t)(oh * 3600 + om * 60);
        if (s[i] == '-')
            offset_s = -offset_s;
        i += 6;
    } else {
        return false;
    }
    if (i != len)
        return false;
    if (sec == 60) /* a leap second folds onto the next second */
        sec = 59, frac = GH_NS_PER_S - 1;
    int64_t days = gh_days_from_civil(Y, M, D);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    *ns = secs * GH_NS_PER_S + frac;
    return true;
}

char *gh_time_format_rfc3339(int64_t ns, char *buf, size_t cap)
{
    int64_t secs = ns / GH_NS_PER_S, rem = ns % GH_NS_PER_S;
    if (rem < 0)
        rem += GH_NS_PER_S, secs -= 1;
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0)
        sod += 86400, days -= 1;
    int64_t y;
    unsigned m, d;
    gh_civil_from_days(days, &y, &m, &d);
    snprintf(buf, cap, "%04lld-%02u-%02uT%02u:%02u:%02u.%06lldZ", (long long)y, m, d,
             (unsigned)(sod / 3600), (unsigned)(sod % 3600 / 60), (unsigned)(sod % 60),
             (long long)(rem / 1000));
    return buf;
}

static int64_t real_now(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * GH_NS_PER_S + ts.tv_nsec;
}

const struct gh_clock *gh_clock_real(void)
{
    static const struct gh_clock real = {real_now, NULL};
    return &real;
}
