/* svg_draw.h - SVG elements written to a stream, their text escaped
 * (html_escape.h): the primitives the report page's timeline and step
 * charts (report/html_*.c) and the simulator's chart (sim/svg.c) share.
 * Coordinates are written with one decimal. */
#ifndef GH_COMMON_SVG_DRAW_H
#define GH_COMMON_SVG_DRAW_H

#include <stdio.h>

/* <line[ class="cls"] x1=".." y1=".." x2=".." y2=".."[extra]/>. cls: NULL or
 * a class name; extra: NULL or attribute text written as it is (a constant
 * of the caller's, starting with a space, never input). f, cls, extra
 * borrowed. */
void gh_svg_line(FILE *f, const char *cls, double x1, double y1, double x2, double y2,
                 const char *extra);

/* <text x=".." y=".."[ text-anchor="anchor"]>s</text>, s escaped (NULL:
 * empty). anchor: NULL (start), "middle" or "end". All borrowed. */
void gh_svg_text(FILE *f, double x, double y, const char *anchor, const char *s);

/* A diamond of half-diagonal s centred on (x, y), as a <path/>. */
void gh_svg_diamond(FILE *f, double x, double y, double s);

#endif
