/* xid_catalog.h - NVIDIA XID codes -> name, fault class, severity and default
 * actions. The table is generated at build time from data/xid-catalog.tsv
 * (the one source of truth, reviewed row by row from shared/data). */
#ifndef GH_SIGNAL_XID_CATALOG_H
#define GH_SIGNAL_XID_CATALOG_H

#include <stdbool.h>

#include "signal/taxonomy.h"

#define GH_XID_MAX_ACTIONS 4

struct gh_xid_info {
    int code;                 /* -1 for the "unknown code" entry */
    const char *name;         /* NVIDIA's name, e.g. "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" */
    const char *summary;      /* one short human phrase */
    enum gh_class cls;
    enum gh_severity severity;
    bool application;         /* typically caused by the application, not the hardware */
    bool secondary;           /* a consequence of another XID (e.g. 45): act on the cause */
    int n_actions;
    enum gh_action actions[GH_XID_MAX_ACTIONS]; /* ordered default actions */
};

/* Returns the entry for code; never NULL. An unknown code returns a static
 * entry with code -1, class unknown and action run_diagnostics, so an
 * unrecognised XID is never silently ignored. */
const struct gh_xid_info *gh_xid_lookup(int code);

/* True when code is in the catalog. */
bool gh_xid_known(int code);

/* Iteration over the table in code order: index 0..gh_xid_count()-1. */
int gh_xid_count(void);
const struct gh_xid_info *gh_xid_at(int index);

#endif
