/* html.h - draws a gh_report (report.h) as one self-contained HTML page:
 * inline CSS, SVG drawn here, no script, nothing fetched. The page has
 *
 *   #summary          counts and the table #incidents-table (blamed node in
 *                     td.node.blamed), one row per incident
 *   svg#timeline      one g.lane per source group and node (per GPU for the
 *                     kernel log and NVML/DCGM), markers .marker with the raw
 *                     line in their <title>; gpuheal's decisions (.decision,
 *                     rule and reason in the title) and actions on lanes of
 *                     their own, and a line.decision-line across all lanes
 *   svg.step-chart    per job (#steps-0, ...): step time per rank, or per
 *                     node for large jobs, as polyline.series; the blamed
 *                     node's are .series.blamed
 *   #decisions-table  decisions, guard verdicts and actions in time order
 *   article.incident  per incident (#incident-0, ...): reason, table.evidence
 *                     with the raw lines, guard verdicts, actions
 *   .truncated        wherever a cap left something out, saying what
 *
 * Every string that came from input is escaped (gh_html_escape,
 * common/html_escape.h). The page is drawn by html.c, html_timeline.c and
 * html_steps.c from the plan of html_plan.c (html_ctx.h). */
#ifndef GH_REPORT_HTML_H
#define GH_REPORT_HTML_H

#include <stdio.h>

#include "common/err.h"
#include "common/html_escape.h"
#include "report/report.h"

/* Writes the page for r (borrowed) to out (borrowed). GH_OK, GH_ENOMEM, or
 * GH_EIO when writing failed. */
int gh_report_write_html(const struct gh_report *r, FILE *out, struct gh_err *err);

#endif
