/* kmsg_text.h - the few text scanners that every file of the kernel-log
 * parser uses (kmsg.c, kmsg_stamp.c, kmsg_wrap.c, kmsg_label.c): bounded
 * reads of s[0..n), never past n, no allocation. Internal to src/signal/;
 * static inline so that the scanner's hot path costs what it did when they
 * were static functions of kmsg.c. */
#ifndef GH_SIGNAL_KMSG_TEXT_H
#define GH_SIGNAL_KMSG_TEXT_H

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>

/* Up to max_digits (at most 18) decimal digits at s into *v; *used (may be
 * NULL) gets how many. false when s does not start with a digit. */
static inline bool gh_kmsg_uint(const char *s, size_t n, size_t max_digits, long long *v,
                                size_t *used)
{
    size_t i = 0;
    long long x = 0;
    if (max_digits > 18) /* 10^18 - 1 fits in a long long */
        max_digits = 18;
    while (i < n && i < max_digits && isdigit((unsigned char)s[i]))
        x = x * 10 + (s[i++] - '0');
    if (i == 0)
        return false;
    *v = x;
    if (used)
        *used = i;
    return true;
}

/* The first index >= i of s that is not a blank or tab (n when none). */
static inline size_t gh_kmsg_skip_sp(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

/* The first index >= i of s that is a blank or tab (n when none). */
static inline size_t gh_kmsg_token_end(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] != ' ' && s[i] != '\t')
        i++;
    return i;
}

#endif
