/* svg.c - writes a line chart as SVG: axes with rounded ticks, polylines, legend
 * (text escaped and elements written by common/svg_draw.c, as on the report page). */
#include "sim/svg.h"

#include <math.h>

#include "common/html_escape.h"
#include "common/svg_draw.h"

#define W 800.0
#define H 500.0
#define ML 80.0  /* margins: left, right, top, bottom */
#define MR 30.0
#define MT 50.0
#define MB 70.0

static const char *const colours[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4",
                                      "#9467bd", "#8c564b", "#7f7f7f", "#17becf"};

/* A "nice" tick step for a range: 1, 2 or 5 x 10^k, about n ticks. */
static double nice_step(double range, int n)
{
    double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

int gh_svg_write(FILE *f, const struct gh_svg_chart *ch)
{
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t s = 0; s < ch->n_series; s++)
        for (size_t i = 0; i < ch->series[s].n; i++) {
            double x = ch->series[s].x[i], y = ch->series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (ch->logx && !(x > 0)))
                continue;
            x = ch->logx ? log10(x) : x;
            x0 = fmin(x0, x);
            x1 = fmax(x1, x);
            y0 = fmin(y0, y);
            y1 = fmax(y1, y);
        }
    if (!(x1 >= x0) || !(y1 >= y0))
        return -1;
    if (x1 - x0 < 1e-12) {
        x0 -= 0.5;
        x1 += 0.5;
    }
    double pad = (y1 - y0) * 0.08 + 1e-6;
    y0 -= pad;
    y1 += pad;
    double ystep = nice_step(y1 - y0, 6);
    y0 = floor(y0 / ystep) * ystep;
    y1 = ceil(y1 / ystep) * ystep;
    double pw = W - ML - MR, ph = H - MT - MB;
#define PX(x) (ML + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (MT + ph - ((y) - y0) / (y1 - y0) * ph)
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"13\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", W / 2);
    gh_html_escape(f, ch->title);
    fputs("</text>\n", f);
    /* grid and y ticks */
    for (double y = y0; y <= y1 + ystep * 1e-6; y += ystep) {
        gh_svg_line(f, NULL, ML, PY(y), ML + pw, PY(y), " stroke=\"#ddd\"");
        fputc('\n', f);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 6, PY(y) + 4,
                fabs(y) < ystep * 1e-6 ? 0.0 : y);
    }
    /* x ticks: decades (1, 2, 5) when logarithmic */
    if (ch->logx) {
        for (int e = (int)floor(x0); e <= (int)ceil(x1); e++)
            for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
                double v = log10(m * pow(10, e));
                if (v < x0 - 1e-9 || v > x1 + 1e-9)
                    continue;
                gh_svg_line(f, NULL, PX(v), MT, PX(v), MT + ph, " stroke=\"#ddd\"");
                fputc('\n', f);
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(v),
                        MT + ph + 18, m * pow(10, e));
            }
    } else {
        double xs = nice_step(x1 - x0, 8);
        for (double x = ceil(x0 / xs) * xs; x <= x1 + xs * 1e-6; x += xs)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(x),
                    MT + ph + 18, x);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"black\"/>\n", ML, MT, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ML + pw / 2, H - 20);
    gh_html_escape(f, ch->xlabel);
    fprintf(f, "</text>\n<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">",
            MT + ph / 2);
    gh_html_escape(f, ch->ylabel);
    fputs("</text>\n", f);
    /* series and legend */
    for (size_t s = 0; s < ch->n_series; s++) {
        const struct gh_svg_series *se = &ch->series[s];
        const char *col = colours[s % (sizeof colours / sizeof colours[0])];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", col,
                se->dashed ? " stroke-dasharray=\"6 4\"" : "");
        for (size_t i = 0; i < se->n; i++) {
            double x = se->x[i], y = se->y[i];
            if (!isfinite(x) || !isfinite(y) || (ch->logx && !(x > 0)))
                continue;
            fprintf(f, "%.1f,%.1f ", PX(ch->logx ? log10(x) : x), PY(y));
        }
        fputs("\"/>\n", f);
        for (size_t i = 0; i < se->n && !se->dashed; i++) {
            double x = se->x[i], y = se->y[i];
            if (!isfinite(x) || !isfinite(y) || (ch->logx && !(x > 0)))
                continue;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    PX(ch->logx ? log10(x) : x), PY(y), col);
        }
        double ly = MT + 14 + 18 * (double)s;
        char stroke[96];
        snprintf(stroke, sizeof stroke, " stroke=\"%s\" stroke-width=\"2\"%s", col,
                 se->dashed ? " stroke-dasharray=\"6 4\"" : "");
        gh_svg_line(f, NULL, ML + pw - 200, ly, ML + pw - 170, ly, stroke);
        fputc('\n', f);
        gh_svg_text(f, ML + pw - 162, ly + 4, NULL, se->name);
        fputc('\n', f);
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
    return ferror(f) ? -1 : 0;
}
