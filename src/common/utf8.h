/* utf8.h - the one UTF-8 rule: strict RFC 3629 (no overlong forms, no
 * surrogates, nothing above U+10FFFF), the rule jansson applies to every
 * string it decodes. The signal codec, the kernel-log parser and the HTML
 * report all judge bytes by it, so a string one accepts the others accept. */
#ifndef GH_COMMON_UTF8_H
#define GH_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8 of s[0..len) (s borrowed; NUL bytes count as ASCII). */
bool gh_utf8_valid(const char *s, size_t len);

/* Length of the one strict UTF-8 sequence at s[0..len) (len >= 1; ASCII,
 * NUL included, is 1), 0 when s does not start a valid one. */
size_t gh_utf8_seq(const char *s, size_t len);
/* Cuts the NUL-terminated s after its last whole UTF-8 sequence (at the
 * first byte that does not start one): for text of valid UTF-8 that a
 * bounded snprintf may have cut inside a character. Returns s. */
char *gh_utf8_trim(char *s);

#endif
