/* dcgm_shipped.h - the dcgm-exporter XIDs the agent has already seen and
 * shipped, kept in the agent's state directory so that a restart does not
 * send the exporter's standing "last XID" (or XID counts) again as a new
 * signal with a new id. Per boot: after a reboot the exporter starts from
 * zero and what it shows is new.
 *
 * File format (text, one record a line, at most GH_DCGM_SHIPPED_FILE_MAX
 * bytes):
 *   gpuheal-dcgm-state v1
 *   boot_id ID
 *   gpu G last CODE          the DCGM_FI_DEV_XID_ERRORS gauge of GPU G
 *   gpu G xid CODE COUNT     a DCGM_EXP_XID_ERRORS_COUNT{xid=CODE} value
 * Written whole to a temporary file, fsynced and renamed over the old one. */
#ifndef GH_AGENT_DCGM_SHIPPED_H
#define GH_AGENT_DCGM_SHIPPED_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define GH_DCGM_SHIPPED_CODES 32
#define GH_DCGM_SHIPPED_FILE_MAX (64 * 1024)

/* What was seen of one GPU's XIDs (a value type). */
struct gh_dcgm_xid_seen {
    bool known;    /* this GPU has a record */
    bool has_last; /* the last-XID gauge */
    double last;
    unsigned n;    /* per-code counts */
    struct {
        int code;
        double count;
    } xid[GH_DCGM_SHIPPED_CODES];
};

/* Parses text[0..len) into v[0..ngpus) (cleared first) when its boot_id is
 * boot_id; *same_boot says whether it was. GH_EINVAL names the first bad
 * line (nothing is taken from a bad file). */
int gh_dcgm_shipped_parse(const char *text, size_t len, const char *boot_id,
                          struct gh_dcgm_xid_seen *v, size_t ngpus, bool *same_boot,
                          struct gh_err *err);

/* Reads path (a missing file: nothing known, GH_OK) and parses it. */
int gh_dcgm_shipped_load(const char *path, const char *boot_id, struct gh_dcgm_xid_seen *v,
                         size_t ngpus, bool *same_boot, struct gh_err *err);

/* Writes the known records of v[0..ngpus) for boot_id to path. */
int gh_dcgm_shipped_save(const char *path, const char *boot_id,
                         const struct gh_dcgm_xid_seen *v, size_t ngpus, struct gh_err *err);

#endif
