/* kmsg_wrap.c - strips what real systems put in front of a kernel message
 * (see kmsg_wrap.h): /dev/kmsg record prefixes, syslog and RFC 5424
 * headers, journald's and dmesg's stamps and decode prefixes, host names
 * and the "kernel:" tag, and collects their stamps (kmsg_stamp.h). */
#include "signal/kmsg_wrap.h"
#include "signal/kmsg_text.h"

#include <ctype.h>
#include <string.h>

bool gh_kmsg_wrap_record(const char *s, size_t n, uint64_t *seq, int64_t *usec, size_t *off)
{
    long long v[3];
    size_t i = 0, u;
    for (int k = 0; k < 3; k++) {
        if (!gh_kmsg_uint(s + i, n - i, 20, &v[k], &u) || i + u >= n || s[i + u] != ',')
            return false;
        i += u + 1;
    }
    size_t lim = i + 64 < n ? i + 64 : n;
    for (size_t j = i; j < lim; j++) {
        if (s[j] == ';') {
            *seq = (uint64_t)v[1];
            *usec = v[2];
            *off = j + 1;
            return true;
        }
        if (s[j] == ' ')
            return false;
    }
    return false;
}

static bool is_level_word(const char *s, size_t n)
{
    static const char *const w[] = {"kern:", "kernel:", "warning:", "warn:",  "err:",   "error:",
                                    "info:", "notice:", "crit:",    "alert:", "emerg:", "debug:"};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (strlen(w[i]) == n && memcmp(s, w[i], n) == 0)
            return true;
    return false;
}

/* "kernel:" or "kernel[123]:" */
static bool is_kernel_tag(const char *s, size_t n)
{
    if (n >= 7 && memcmp(s, "kernel", 6) == 0 && s[n - 1] == ':')
        return n == 7 || s[6] == '[';
    return false;
}

/* Past the host name that a syslog or journald stamp ending at i leaves
 * before the "kernel:" tag; i itself when the tag comes first. */
static size_t skip_host(const char *s, size_t n, size_t i)
{
    size_t h = gh_kmsg_skip_sp(s, n, i), he = gh_kmsg_token_end(s, n, h);
    return he > h && !is_kernel_tag(s + h, he - h) ? he : i;
}

/* Is "kernel:" or "<host> kernel:" next after position i? */
static bool followed_by_kernel_tag(const char *s, size_t n, size_t i)
{
    size_t a = gh_kmsg_skip_sp(s, n, i), ae = gh_kmsg_token_end(s, n, a);
    if (ae > a && is_kernel_tag(s + a, ae - a))
        return true;
    size_t b = gh_kmsg_skip_sp(s, n, ae), be = gh_kmsg_token_end(s, n, b);
    return ae > a && be > b && is_kernel_tag(s + b, be - b);
}

/* A syslog or journald stamp in a locale we cannot read ("jan. 29 20:50:17",
 * month names in CJK locales) before "[host] kernel:": the offset just past that tag,
 * 0 when the line does not start so. Such lines get no wall-clock stamp. */
static size_t foreign_stamp(const char *s, size_t n, size_t i)
{
    bool clock = false;
    for (int t = 0; t < 6 && i < n; t++) {
        i = gh_kmsg_skip_sp(s, n, i);
        size_t te = gh_kmsg_token_end(s, n, i);
        if (te == i)
            return 0;
        if (clock && is_kernel_tag(s + i, te - i))
            return te;
        long long h, mi, sec;
        int64_t frac;
        size_t k;
        if (!clock && (k = gh_kmsg_stamp_hms(s + i, te - i, &h, &mi, &sec)) > 0)
            clock = i + k + gh_kmsg_stamp_frac(s + i + k, te - i - k, &frac) == te;
        i = te;
    }
    return 0;
}

/* util-linux `dmesg --decode` (-x) puts "%-6s:%-6s: " (facility, level) in
 * front of the stamp: "kern  :warn  : ", "daemon:err   : ". Returns the bytes
 * of that prefix at s, 0 when there is none. */
static size_t decode_prefix(const char *s, size_t n)
{
    static const char *const levels[] = {"emerg", "alert",  "crit", "err",
                                         "warn",  "notice", "info", "debug"};
    size_t i = 0;
    while (i < n && i < 8 && (islower((unsigned char)s[i]) || isdigit((unsigned char)s[i])))
        i++;
    if (i < 3)
        return 0;
    i = gh_kmsg_skip_sp(s, n, i);
    if (i >= n || s[i] != ':')
        return 0;
    size_t ls = ++i;
    while (i < n && islower((unsigned char)s[i]))
        i++;
    size_t le = i;
    i = gh_kmsg_skip_sp(s, n, i);
    if (i >= n || s[i] != ':')
        return 0;
    for (size_t k = 0; k < sizeof levels / sizeof levels[0]; k++)
        if (strlen(levels[k]) == le - ls && memcmp(s + ls, levels[k], le - ls) == 0)
            return i + 1;
    return 0;
}

void gh_kmsg_wrap_parse(const struct gh_kmsg_zone *p, const char *s, size_t n,
                        struct gh_kmsg_wrap *w)
{
    memset(w, 0, sizeof *w);
    int64_t usec;
    if (n && isdigit((unsigned char)s[0]) &&
        gh_kmsg_wrap_record(s, n, &w->seq, &usec, &w->msg_off)) {
        w->has_seq = true;
        w->has_mono = usec <= INT64_MAX / GH_NS_PER_US;
        w->mono_ns = w->has_mono ? usec * GH_NS_PER_US : 0;
        return;
    }
    size_t i = 0;
    bool rfc5424 = false;
    if (n > 2 && s[0] == '<') {
        size_t j = 1;
        while (j < n && j < 5 && isdigit((unsigned char)s[j]))
            j++;
        if (j > 1 && j < n && s[j] == '>') {
            i = j + 1;
            if (i + 1 < n && s[i] == '1' && s[i + 1] == ' ') {
                rfc5424 = true;
                i += 2;
            }
        }
    }
    for (int iter = 0; iter < 10; iter++) {
        i = gh_kmsg_skip_sp(s, n, i);
        if (i >= n)
            break;
        int64_t ns;
        size_t k;
        char c = s[i];
        if (isdigit((unsigned char)c) && (k = gh_kmsg_stamp_iso(s + i, n - i, p->tz_s, &ns)) > 0 &&
            (i + k == n || s[i + k] == ' ')) {
            if (!w->has_wall)
                w->has_wall = true, w->wall_ns = ns;
            i += k;
            if (rfc5424) { /* HOST APP PROCID MSGID SD */
                for (int t = 0; t < 4; t++)
                    i = gh_kmsg_token_end(s, n, gh_kmsg_skip_sp(s, n, i));
                i = gh_kmsg_skip_sp(s, n, i);
                if (i < n && s[i] == '-') {
                    i++;
                } else {
                    while (i < n && s[i] == '[') {
                        const char *e = memchr(s + i, ']', n - i);
                        i = e ? (size_t)(e - s) + 1 : n;
                    }
                }
                rfc5424 = false;
            }
            continue;
        }
        if (c == '[') {
            const char *e = memchr(s + i, ']', n - i < 48 ? n - i : 48);
            if (!e)
                break;
            size_t close = (size_t)(e - s);
            enum gh_kmsg_stamp_kind sk = gh_kmsg_stamp_bracket(p, s + i + 1, close - i - 1, &ns);
            if (sk == GH_KMSG_ST_NONE)
                break;
            if (sk == GH_KMSG_ST_WALL && !w->has_wall)
                w->has_wall = true, w->wall_ns = ns;
            if (sk == GH_KMSG_ST_MONO && !w->has_mono)
                w->has_mono = true, w->mono_ns = ns;
            i = close + 1;
            if (i < n && s[i] == ':')
                i++;
            continue;
        }
        if (isupper((unsigned char)c) &&
            (k = gh_kmsg_stamp_weekday_iso(p, s + i, n - i, &ns)) > 0) {
            if (!w->has_wall)
                w->has_wall = true, w->wall_ns = ns;
            i = skip_host(s, n, i + k);
            continue;
        }
        if (isdigit((unsigned char)c) && (k = gh_kmsg_stamp_epoch(s + i, n - i, &ns)) > 0 &&
            followed_by_kernel_tag(s, n, i + k)) {
            if (!w->has_wall)
                w->has_wall = true, w->wall_ns = ns;
            i += k;
            continue;
        }
        if (isupper((unsigned char)c) && (k = gh_kmsg_stamp_syslog(p, s + i, n - i, &ns)) > 0) {
            if (!w->has_wall)
                w->has_wall = true, w->wall_ns = ns;
            i = skip_host(s, n, i + k); /* the host name follows a syslog stamp */
            continue;
        }
        if (islower((unsigned char)c) && (k = decode_prefix(s + i, n - i)) > 0) {
            i += k;
            continue;
        }
        size_t te = gh_kmsg_token_end(s, n, i);
        if (is_kernel_tag(s + i, te - i) || is_level_word(s + i, te - i)) {
            i = te;
            continue;
        }
        if (iter == 0 && (k = foreign_stamp(s, n, i)) > 0) {
            i = k;
            continue;
        }
        /* "<host> kernel:" and "<host>: kern:" */
        size_t nx = gh_kmsg_skip_sp(s, n, te), nxe = gh_kmsg_token_end(s, n, nx);
        if (te > i && nxe > nx &&
            (is_kernel_tag(s + nx, nxe - nx) ||
             (s[te - 1] == ':' && is_level_word(s + nx, nxe - nx)))) {
            i = nxe;
            continue;
        }
        break;
    }
    w->msg_off = i;
}
