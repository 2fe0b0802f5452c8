/* html_escape.c - HTML/SVG escaping: the five markup characters as
 * entities, what XML cannot carry (control characters, invalid UTF-8) as
 * U+FFFD, so that a page or chart drawn from untrusted strings stays
 * well-formed. */
#include "common/html_escape.h"

#include <stdbool.h>
#include <string.h>

#include "common/utf8.h"

static void put_fffd(FILE *out) { fputs("\xEF\xBF\xBD", out); }

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
            } else if ((k = gh_utf8_seq((const char *)p, n)) == 0) {
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
