/* svg_draw.c - the SVG elements of svg_draw.h. */
#include "common/svg_draw.h"

#include "common/html_escape.h"

void gh_svg_line(FILE *f, const char *cls, double x1, double y1, double x2, double y2,
                 const char *extra)
{
    fputs("<line", f);
    if (cls)
        fprintf(f, " class=\"%s\"", cls);
    fprintf(f, " x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"%s/>", x1, y1, x2, y2,
            extra ? extra : "");
}

void gh_svg_text(FILE *f, double x, double y, const char *anchor, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\"", x, y);
    if (anchor)
        fprintf(f, " text-anchor=\"%s\"", anchor);
    fputc('>', f);
    gh_html_escape(f, s);
    fputs("</text>", f);
}

void gh_svg_diamond(FILE *f, double x, double y, double s)
{
    fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\"/>", x, y - s, x + s, y, x,
            y + s, x - s, y);
}
