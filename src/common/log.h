/* log.h - the one place gpuheal writes diagnostics: level-checked key=value
 * lines on stderr. Only top-level code (src/cmd, daemons' loops) logs;
 * library modules return errors instead. */
#ifndef GH_COMMON_LOG_H
#define GH_COMMON_LOG_H

enum gh_log_level { GH_LOG_DEBUG, GH_LOG_INFO, GH_LOG_WARN, GH_LOG_ERROR, GH_LOG_OFF };

/* Configuration read once at start (the only process-wide setting). */
void gh_log_set_level(enum gh_log_level level);
enum gh_log_level gh_log_level(void);
/* Parses "debug|info|warn|error|off"; returns -1 when unknown. */
int gh_log_parse_level(const char *s);

void gh_log_write(enum gh_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Formats only when the level is enabled. */
#define GH_LOG(level, ...)                                                     \
    do {                                                                       \
        if ((level) >= gh_log_level())                                         \
            gh_log_write((level), __FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)

#endif
