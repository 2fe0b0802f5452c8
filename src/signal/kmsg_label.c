/* kmsg_label.c - the label vocabulary of the kernel-log samples
 * (shared/data/kmsg-samples.txt; see kmsg_label.h): names, formatting and
 * parsing of "NOMATCH", "MATCH xid=N", "MATCH sxid=N", "MATCH other=NAME". */
#include "signal/kmsg_label.h"
#include "signal/kmsg_text.h"

#include <stdio.h>
#include <string.h>

static const char *const other_names[GH_KMSG_O__COUNT] = {
    "",
    "gpu_uuid_map",
    "gpu_serial",
    "gpu_fallen_off_bus",
    "gpu_lost_probe",
    "probe_failed",
    "peermem_invalid_context",
    "nvlink_post_rx_detect_failure",
    "mlx5_pcie_insufficient_power",
    "mlx5_port_module_error",
    "mlx5_access_reg_err",
    "nccl_segfault",
    "pcie_aer",
    "pcie_aer_correctable",
};

const char *gh_kmsg_other_name(enum gh_kmsg_other o)
{
    return (unsigned)o < GH_KMSG_O__COUNT && o != GH_KMSG_O_NONE ? other_names[o] : "?";
}

int gh_kmsg_other_from_name(const char *name)
{
    for (int i = 1; i < GH_KMSG_O__COUNT; i++)
        if (strcmp(name, other_names[i]) == 0)
            return i;
    return -1;
}

char *gh_kmsg_label_format(const struct gh_kmsg_label *l, char *buf, size_t cap)
{
    if (!cap)
        return buf;
    switch (l->cls) {
    case GH_KMSG_XID: snprintf(buf, cap, "MATCH xid=%d", l->code); break;
    case GH_KMSG_SXID: snprintf(buf, cap, "MATCH sxid=%d", l->code); break;
    case GH_KMSG_OTHER: snprintf(buf, cap, "MATCH other=%s", gh_kmsg_other_name(l->other)); break;
    default: snprintf(buf, cap, "NOMATCH"); break;
    }
    return buf;
}

int gh_kmsg_label_parse(const char *s, size_t len, struct gh_kmsg_label *l)
{
    memset(l, 0, sizeof *l);
    if (len == 7 && memcmp(s, "NOMATCH", 7) == 0)
        return GH_OK;
    if (len < 7 || memcmp(s, "MATCH ", 6) != 0)
        return GH_EINVAL;
    s += 6, len -= 6;
    long long v;
    size_t used;
    if (len > 4 && memcmp(s, "xid=", 4) == 0) {
        if (!gh_kmsg_uint(s + 4, len - 4, 9, &v, &used) || used != len - 4)
            return GH_EINVAL;
        l->cls = GH_KMSG_XID, l->code = (int)v;
        return GH_OK;
    }
    if (len > 5 && memcmp(s, "sxid=", 5) == 0) {
        if (!gh_kmsg_uint(s + 5, len - 5, 9, &v, &used) || used != len - 5)
            return GH_EINVAL;
        l->cls = GH_KMSG_SXID, l->code = (int)v;
        return GH_OK;
    }
    if (len > 6 && memcmp(s, "other=", 6) == 0) {
        for (int i = 1; i < GH_KMSG_O__COUNT; i++) {
            size_t n = strlen(other_names[i]);
            if (n == len - 6 && memcmp(s + 6, other_names[i], n) == 0) {
                l->cls = GH_KMSG_OTHER, l->other = (enum gh_kmsg_other)i;
                return GH_OK;
            }
        }
    }
    return GH_EINVAL;
}
