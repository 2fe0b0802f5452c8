/* kmsg_stamp.c - the time stamps of kernel-log text (see kmsg_stamp.h):
 * RFC 3339 / ISO 8601, syslog, journalctl's short-full and short-unix,
 * ctime, the fabric manager's, dmesg -H and the bracketed [seconds] since
 * boot. Civil dates through common/timeutil.h. */
#include "signal/kmsg_stamp.h"
#include "signal/kmsg_text.h"

#include <ctype.h>
#include <string.h>

static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

static int parse_month(const char *s, size_t n)
{
    if (n < 3)
        return 0;
    for (int m = 0; m < 12; m++)
        if (memcmp(s, months + 3 * m, 3) == 0)
            return m + 1;
    return 0;
}

static bool valid_hms(long long h, long long mi, long long sec)
{
    return h < 24 && mi < 60 && sec < 61;
}

static int64_t to_ns(int64_t y, int mo, int d, long long h, long long mi, long long sec,
                     int64_t frac_ns, int64_t offset_s)
{
    /* int64 nanoseconds reach 2262; stamps outside 1900..2200 are clamped */
    if (y < 1900)
        y = 1900;
    if (y > 2200)
        y = 2200;
    int64_t days = gh_days_from_civil(y, (unsigned)mo, (unsigned)d);
    return ((days * 86400 + h * 3600 + mi * 60 + sec) - offset_s) * GH_NS_PER_S + frac_ns;
}

static bool valid_year(long long y) { return y >= 1900 && y <= 2200; }

/* HH:MM:SS at s; returns bytes used or 0. */
size_t gh_kmsg_stamp_hms(const char *s, size_t n, long long *h, long long *mi, long long *sec)
{
    if (n < 8 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) || s[2] != ':' ||
        !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]) || s[5] != ':' ||
        !isdigit((unsigned char)s[6]) || !isdigit((unsigned char)s[7]))
        return 0;
    *h = (s[0] - '0') * 10 + (s[1] - '0');
    *mi = (s[3] - '0') * 10 + (s[4] - '0');
    *sec = (s[6] - '0') * 10 + (s[7] - '0');
    return valid_hms(*h, *mi, *sec) ? 8 : 0;
}

/* [.,]digits -> ns; returns bytes used (0 when none). */
size_t gh_kmsg_stamp_frac(const char *s, size_t n, int64_t *ns)
{
    *ns = 0;
    if (n < 2 || (s[0] != '.' && s[0] != ',') || !isdigit((unsigned char)s[1]))
        return 0;
    size_t i = 1;
    int64_t scale = 100000000;
    while (i < n && isdigit((unsigned char)s[i])) {
        *ns += (s[i] - '0') * scale;
        scale /= 10;
        i++;
    }
    return i;
}

/* YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|+hh:mm|+hhmm]; returns bytes used. */
size_t gh_kmsg_stamp_iso(const char *s, size_t n, int32_t tz_s, int64_t *ns)
{
    long long y, mo, d, h, mi, sec;
    size_t u;
    if (n < 19 || !gh_kmsg_uint(s, 4, 4, &y, &u) || u != 4 || s[4] != '-' ||
        !gh_kmsg_uint(s + 5, 2, 2, &mo, &u) || u != 2 || s[7] != '-' ||
        !gh_kmsg_uint(s + 8, 2, 2, &d, &u) || u != 2 ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' '))
        return 0;
    if (!valid_year(y) || mo < 1 || mo > 12 || d < 1 || d > 31 ||
        !gh_kmsg_stamp_hms(s + 11, n - 11, &h, &mi, &sec))
        return 0;
    size_t i = 19;
    int64_t frac;
    i += gh_kmsg_stamp_frac(s + i, n - i, &frac);
    int64_t off = tz_s;
    if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
        off = 0;
        i++;
    } else if (i + 3 <= n && (s[i] == '+' || s[i] == '-') && isdigit((unsigned char)s[i + 1]) &&
               isdigit((unsigned char)s[i + 2])) {
        int sign = s[i] == '-' ? -1 : 1;
        long long oh = (s[i + 1] - '0') * 10 + (s[i + 2] - '0'), om = 0;
        i += 3;
        if (i < n && s[i] == ':')
            i++;
        if (i + 2 <= n && isdigit((unsigned char)s[i]) && isdigit((unsigned char)s[i + 1])) {
            om = (s[i] - '0') * 10 + (s[i + 1] - '0');
            i += 2;
        }
        off = sign * (oh * 3600 + om * 60);
    }
    *ns = to_ns(y, (int)mo, (int)d, h, mi, sec, frac, off);
    return i;
}

/* The year for stamps that have none: the configured one, else the clock's,
 * moved back one when that puts the stamp more than a day in the future
 * (December lines read in January). */
static int64_t stamp_year_ns(const struct gh_kmsg_zone *p, int mo, int d, long long h, long long mi,
                             long long sec, int64_t frac)
{
    if (p->default_year)
        return to_ns(p->default_year, mo, d, h, mi, sec, frac, p->tz_s);
    int64_t now = gh_clock_now(p->clock), y;
    unsigned m_, d_;
    int64_t days = now / GH_NS_PER_S / 86400;
    if (now < 0 && (now / GH_NS_PER_S) % 86400)
        days--;
    gh_civil_from_days(days, &y, &m_, &d_);
    int64_t ns = to_ns(y, mo, d, h, mi, sec, frac, p->tz_s);
    if (now <= INT64_MAX - 86400 * GH_NS_PER_S && ns > now + 86400 * GH_NS_PER_S)
        ns = to_ns(y - 1, mo, d, h, mi, sec, frac, p->tz_s);
    return ns;
}

/* "Mmm dD HH:MM:SS[.frac]" (syslog); returns bytes used. */
size_t gh_kmsg_stamp_syslog(const struct gh_kmsg_zone *p, const char *s, size_t n, int64_t *ns)
{
    int mo = parse_month(s, n);
    if (!mo || n < 15 || s[3] != ' ')
        return 0;
    size_t i = 4;
    if (s[i] == ' ')
        i++;
    long long d;
    size_t u;
    if (!gh_kmsg_uint(s + i, n - i, 2, &d, &u) || d < 1 || d > 31)
        return 0;
    i += u;
    long long h, mi, sec;
    if (i >= n || s[i] != ' ' || !gh_kmsg_stamp_hms(s + i + 1, n - i - 1, &h, &mi, &sec))
        return 0;
    i += 9;
    int64_t frac;
    i += gh_kmsg_stamp_frac(s + i, n - i, &frac);
    if (i < n && s[i] != ' ')
        return 0;
    *ns = stamp_year_ns(p, mo, (int)d, h, mi, sec, frac);
    return i;
}

/* journalctl -o short-full / with-unit: "Sun 2025-02-23 16:24:18[.frac] CET".
 * UTC/GMT name their offset; any other zone name is taken as the configured
 * zone of zone-less stamps (resolving names would need the tz database).
 * Returns bytes used. */
size_t gh_kmsg_stamp_weekday_iso(const struct gh_kmsg_zone *p, const char *s, size_t n, int64_t *ns)
{
    static const char days[] = "MonTueWedThuFriSatSun";
    bool day = false;
    for (int d = 0; d < 7 && n >= 5; d++)
        day = day || memcmp(s, days + 3 * d, 3) == 0;
    if (!day || s[3] != ' ' || !isdigit((unsigned char)s[4]))
        return 0;
    size_t k = gh_kmsg_stamp_iso(s + 4, n - 4, p->tz_s, ns);
    if (!k || (4 + k < n && s[4 + k] != ' '))
        return 0;
    size_t i = 4 + k, z = i + 1, ze = z;
    while (ze < n && ze - z < 6 && isupper((unsigned char)s[ze]))
        ze++;
    if (i < n && ze > z + 1 && (ze == n || s[ze] == ' ')) {
        if ((ze - z == 3 && (memcmp(s + z, "UTC", 3) == 0 || memcmp(s + z, "GMT", 3) == 0)) ||
            (ze - z == 2 && memcmp(s + z, "UT", 2) == 0))
            gh_kmsg_stamp_iso(s + 4, n - 4, 0, ns);
        i = ze;
    }
    return i;
}

/* journalctl -o short-unix: "1740327858.123456" (seconds since the epoch).
 * Returns bytes used; the caller checks that a kernel tag follows. */
size_t gh_kmsg_stamp_epoch(const char *s, size_t n, int64_t *ns)
{
    long long sec;
    size_t u;
    int64_t frac;
    /* 9 or 10 digits, up to 2100-01-01: no overflow in nanoseconds */
    if (!gh_kmsg_uint(s, n, 11, &sec, &u) || u < 9 || u > 10 || sec > 4102444800LL || u >= n ||
        s[u] != '.')
        return 0;
    size_t k = u + gh_kmsg_stamp_frac(s + u, n - u, &frac);
    if (k == u || (k < n && s[k] != ' '))
        return 0;
    *ns = sec * GH_NS_PER_S + frac;
    return k;
}

/* The inside of a [...] stamp. */
enum gh_kmsg_stamp_kind gh_kmsg_stamp_bracket(const struct gh_kmsg_zone *p, const char *s, size_t n,
                                              int64_t *ns)
{
    size_t i = gh_kmsg_skip_sp(s, n, 0);
    size_t e = n;
    while (e > i && s[e - 1] == ' ')
        e--;
    const char *t = s + i;
    size_t m = e - i;
    if (m == 0)
        return GH_KMSG_ST_NONE;
    if (m == 3 && memcmp(t, "...", 3) == 0)
        return GH_KMSG_ST_OTHER;
    if (t[0] == '+' || t[0] == '<') /* dmesg -H / -d relative stamps */
        return GH_KMSG_ST_OTHER;
    if ((t[0] == 'T' || t[0] == 'C') && m >= 2) { /* caller id [ T1946] */
        size_t k = 1;
        while (k < m && isdigit((unsigned char)t[k]))
            k++;
        if (k == m)
            return GH_KMSG_ST_OTHER;
    }
    if (isdigit((unsigned char)t[0])) {
        if (gh_kmsg_stamp_iso(t, m, p->tz_s, ns) == m)
            return GH_KMSG_ST_WALL;
        long long sec;
        size_t u;
        if (gh_kmsg_uint(t, m, 9, &sec, &u)) {
            int64_t frac = 0;
            size_t k = u + gh_kmsg_stamp_frac(t + u, m - u, &frac);
            size_t d = gh_kmsg_skip_sp(t, m, k);
            /* journalctl -o short-delta: "[ 1234.567890 <    0.000123>]" */
            if (k == m || (d > k && d < m && t[d] == '<' && t[m - 1] == '>')) {
                *ns = sec * GH_NS_PER_S + frac;
                return GH_KMSG_ST_MONO;
            }
        }
        return GH_KMSG_ST_NONE;
    }
    /* ctime "Sun Feb 23 16:24:18 2025" */
    if (m >= 24 && isupper((unsigned char)t[0]) && t[3] == ' ') {
        int mo = parse_month(t + 4, m - 4);
        long long d, h, mi, sec, y;
        size_t u, k = 8;
        if (mo && t[7] == ' ' && t[k] == ' ')
            k++;
        if (mo && gh_kmsg_uint(t + k, m - k, 2, &d, &u) && d >= 1 && d <= 31) {
            k += u;
            if (k < m && t[k] == ' ' && gh_kmsg_stamp_hms(t + k + 1, m - k - 1, &h, &mi, &sec)) {
                k += 9;
                int64_t frac;
                k += gh_kmsg_stamp_frac(t + k, m - k, &frac);
                if (k < m && t[k] == ' ' && gh_kmsg_uint(t + k + 1, m - k - 1, 4, &y, &u) &&
                    k + 1 + u == m && valid_year(y)) {
                    *ns = to_ns(y, mo, (int)d, h, mi, sec, frac, p->tz_s);
                    return GH_KMSG_ST_WALL;
                }
            }
        }
    }
    int mo = parse_month(t, m);
    if (mo) {
        long long d, y, h, mi, sec;
        size_t u;
        /* fabric manager "Jul 23 2024 07:53:55" */
        if (m == 20 && t[3] == ' ' && gh_kmsg_uint(t + 4, 2, 2, &d, &u) && u == 2 && t[6] == ' ' &&
            gh_kmsg_uint(t + 7, 4, 4, &y, &u) && u == 4 && t[11] == ' ' &&
            gh_kmsg_stamp_hms(t + 12, m - 12, &h, &mi, &sec) && d >= 1 && d <= 31 &&
            valid_year(y)) {
            *ns = to_ns(y, mo, (int)d, h, mi, sec, 0, p->tz_s);
            return GH_KMSG_ST_WALL;
        }
        /* dmesg -H "Nov29 11:28" */
        if (m >= 10 && gh_kmsg_uint(t + 3, m - 3, 2, &d, &u) && d >= 1 && d <= 31) {
            size_t k = 3 + u;
            long long hh, mm;
            size_t u1, u2;
            if (k < m && t[k] == ' ' && gh_kmsg_uint(t + k + 1, m - k - 1, 2, &hh, &u1) &&
                u1 == 2 && k + 3 < m && t[k + 3] == ':' &&
                gh_kmsg_uint(t + k + 4, m - k - 4, 2, &mm, &u2) && u2 == 2 && k + 6 == m &&
                hh < 24 && mm < 60) {
                *ns = stamp_year_ns(p, mo, (int)d, hh, mm, 0, 0);
                return GH_KMSG_ST_WALL;
            }
        }
    }
    return GH_KMSG_ST_NONE;
}
