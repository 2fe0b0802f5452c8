/* audit_int.h - what the audit store's own modules (telemetry.c,
 * history.c) share with audit.c: the store's SQL connection. Not for use
 * outside src/audit. */
#ifndef GH_AUDIT_AUDIT_INT_H
#define GH_AUDIT_AUDIT_INT_H

#include "audit/audit.h"
#include "audit/db.h"

/* The store's connection (borrowed; lives as long as a). */
struct gh_db *gh_audit__db(struct gh_audit *a);

#endif
