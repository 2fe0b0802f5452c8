/* log.c - key=value log lines on stderr with a UTC timestamp and level. */
#include "common/log.h"
#include "common/timeutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum gh_log_level g_level = GH_LOG_INFO; /* set once at start */

void gh_log_set_level(enum gh_log_level level) { g_level = level; }
enum gh_log_level gh_log_level(void) { return g_level; }

int gh_log_parse_level(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void gh_log_write(enum gh_log_level level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    char ts[GH_RFC3339_MAX], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    gh_time_format_rfc3339(gh_clock_now(gh_clock_real()), ts, sizeof ts);
    fprintf(stderr, "ts=%s level=%s at=%s:%d %s\n", ts, names[level], base ? base + 1 : file,
            line, msg);
}
