/* explain.h - audit records told for people: the causal chain of each
 * incident in plain words (what was seen, which rule decided what, what the
 * guards said, what was done and with what result), and an aligned
 * timeline of the same facts in time order. Pure formatting over records
 * loaded with gh_audit_query; the caller chooses the stream. */
#ifndef GH_AUDIT_EXPLAIN_H
#define GH_AUDIT_EXPLAIN_H

#include <stdint.h>
#include <stdio.h>

#include "audit/audit.h"

/* Writes the explanation of recs[0..n) (oldest first) about subj to out.
 * since_ns (0: none) is echoed in the heading. */
void gh_explain_write(FILE *out, const struct gh_audit_subject *subj, int64_t since_ns,
                      const struct gh_audit_incident_rec *recs, size_t n);

/* Writes one line per evidence signal, decision, guard verdict and action,
 * in time order, columns aligned. */
void gh_timeline_write(FILE *out, const struct gh_audit_subject *subj,
                       const struct gh_audit_incident_rec *recs, size_t n);

#endif
