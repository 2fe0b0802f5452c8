/* utf8.c - strict UTF-8 sequences and strings (see utf8.h). */
#include "common/utf8.h"

#include <string.h>

#include <stdint.h>

size_t gh_utf8_seq(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0], n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 3, cp = c & 0x07;
    else
        return 0;
    if (len <= n)
        return 0;
    for (unsigned k = 1; k <= n; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n + 1;
}

bool gh_utf8_valid(const char *str, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (!(str[i] & 0x80)) {
            i++;
            continue;
        }
        size_t k = gh_utf8_seq(str + i, len - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

char *gh_utf8_trim(char *s)
{
    size_t n = strlen(s), i = 0, k;
    while (i < n && (k = gh_utf8_seq(s + i, n - i)) > 0)
        i += k;
    s[i] = '\0';
    return s;
}
