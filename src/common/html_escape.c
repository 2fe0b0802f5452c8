/* html_escape.c - HTML/SVG escaping: the five markup characters as
 * entities, what XML cannot carry (control characters, invalid UTF-8) as
 * U+FFFD, so that a page or chart drawn from untrusted strings stays
 * well-formed. */
#include "common/html_escape.h"

#include <stdbool.h>
#include <string.h>

static void put_fffd(FILE *out) { fputs("\xEF\xBF\xBD", out); }

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    unsigned cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Escapes s[0..n); in a <title> (title true) a newline becomes a character
 * reference so that tooltips keep their lines. */
static void escape_n(FILE *out, const char *s, size_t n, bool title)
{
    const unsigned char *p = (const unsigned char *)s;
    while (n) {
        unsigned c = *p;
        size_t k = 1;
        switch (c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        case '\n': fputs(title ? "&#10;" : "\n", out); break;
        case '\t': fputc('\t', out); break;
        default:
            if (c < 0x20 || c == 0x7F) {
                put_fffd(out);
            } else if (c < 0x80) {
                fputc((int)c, out);
            } else if ((k = utf8_len(p, n)) == 0) {
                put_fffd(out);
                k = 1;
            } else {
                fwrite(p, 1, k, out);
            }
        }
        p += k;
        n -= k;
    }
}

void gh_html_escape(FILE *out, const char *s)
{
    if (s)
        escape_n(out, s, strlen(s), false);
}

void gh_html_escape_title(FILE *out, const char *s)
{
    if (s)
        escape_n(out, s, strlen(s), true);
}
