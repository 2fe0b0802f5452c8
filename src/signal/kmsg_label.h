/* kmsg_label.h - the labels the kernel-log parser gives every line, in the
 * vocabulary of the labelled samples (shared/data/kmsg-samples.txt, the
 * corpora under test/data): NOMATCH, MATCH xid=N, MATCH sxid=N,
 * MATCH other=NAME - the values, their names, and the text form that the
 * sample files and `gpuheal kmsg-parse` use. */
#ifndef GH_SIGNAL_KMSG_LABEL_H
#define GH_SIGNAL_KMSG_LABEL_H

#include <stddef.h>

#include "common/err.h"

enum gh_kmsg_class {
    GH_KMSG_NOMATCH = 0,
    GH_KMSG_XID,
    GH_KMSG_SXID,
    GH_KMSG_OTHER,
};

/* The other= names of the label vocabulary, in their wire spelling. */
enum gh_kmsg_other {
    GH_KMSG_O_NONE = 0,
    GH_KMSG_O_GPU_UUID_MAP,
    GH_KMSG_O_GPU_SERIAL,
    GH_KMSG_O_GPU_FALLEN_OFF_BUS,
    GH_KMSG_O_GPU_LOST_PROBE,
    GH_KMSG_O_PROBE_FAILED,
    GH_KMSG_O_PEERMEM_INVALID_CONTEXT,
    GH_KMSG_O_NVLINK_POST_RX_DETECT_FAILURE,
    GH_KMSG_O_MLX5_PCIE_INSUFFICIENT_POWER,
    GH_KMSG_O_MLX5_PORT_MODULE_ERROR,
    GH_KMSG_O_MLX5_ACCESS_REG_ERR,
    GH_KMSG_O_NCCL_SEGFAULT,
    GH_KMSG_O_PCIE_AER,
    GH_KMSG_O_PCIE_AER_CORRECTABLE,
    GH_KMSG_O__COUNT
};

/* A line's classification. code is meaningful for XID and SXID, other for
 * OTHER. */
struct gh_kmsg_label {
    enum gh_kmsg_class cls;
    int code;
    enum gh_kmsg_other other;
};

/* Longest string gh_kmsg_label_format() writes, NUL included. */
#define GH_KMSG_LABEL_MAX 64

/* "gpu_uuid_map", ... ; "?" for out-of-range values. */
const char *gh_kmsg_other_name(enum gh_kmsg_other o);
/* Lookup by wire name; -1 when unknown. */
int gh_kmsg_other_from_name(const char *name);
/* Writes "NOMATCH", "MATCH xid=79", "MATCH sxid=20034" or
 * "MATCH other=pcie_aer" into buf (cap >= GH_KMSG_LABEL_MAX always suffices).
 * Returns buf. */
char *gh_kmsg_label_format(const struct gh_kmsg_label *l, char *buf, size_t cap);
/* Parses the text above (as in the sample files) into *l. Returns GH_OK or
 * GH_EINVAL. */
int gh_kmsg_label_parse(const char *s, size_t len, struct gh_kmsg_label *l);

#endif
