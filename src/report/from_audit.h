/* from_audit.h - fills a report from the audit store (audit/audit.h): the
 * incidents about a subject, or the newest ones overall, with their
 * evidence (also drawn on the timeline), guard verdicts and actions, and
 * the step-time telemetry the controller kept (audit/telemetry.h: one
 * point per rank and bucket, the bucket's mean) for the step charts. */
#ifndef GH_REPORT_FROM_AUDIT_H
#define GH_REPORT_FROM_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"
#include "report/report.h"

/* Adds one loaded record (borrowed). */
int gh_report_add_audit_rec(struct gh_report *r, const struct gh_audit_incident_rec *rec,
                            struct gh_err *err);

/* Loads the incidents about subj (NULL: all) decided at or after since_ns,
 * at most max (0: GH_AUDIT_QUERY_MAX; the newest kept), into r; first the
 * telemetry of the subject job (a job subject), or of every job (no
 * subject or a node subject), from since_ns on. A job with telemetry has
 * its chart drawn from it alone: its evidence steps are not added again. */
int gh_report_load_audit(struct gh_report *r, struct gh_audit *a,
                         const struct gh_audit_subject *subj, int64_t since_ns, size_t max,
                         struct gh_err *err);

#endif
