/* html_escape.h - writes text escaped for HTML and SVG (XML) text and
 * attribute values: the one escaping rule of the report page and the
 * simulator's charts. */
#ifndef GH_COMMON_HTML_ESCAPE_H
#define GH_COMMON_HTML_ESCAPE_H

#include <stdio.h>

/* Writes s (NULL: nothing) escaped to out (borrowed): & < > " ' as
 * entities, control characters other than tab and newline and invalid
 * UTF-8 as U+FFFD. */
void gh_html_escape(FILE *out, const char *s);

/* As gh_html_escape, for an SVG <title> (a tooltip): a newline becomes the
 * character reference &#10; so that the tooltip keeps its lines. */
void gh_html_escape_title(FILE *out, const char *s);

#endif
