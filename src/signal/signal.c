/* signal.c - lifetime of gh_signal values and the wire names of kinds and sources. */
#include "signal/signal.h"

#include <stdlib.h>
#include <string.h>

static const char *const source_names[GH_SRC__COUNT] = {
    "kmsg", "nvml", "dcgm", "host", "telemetry", "kube", "probe",
};

static const char *const kind_names[GH_KIND__COUNT] = {
    "xid",
    "sxid",
    "ecc",
    "row_remap",
    "gpu_lost",
    "nvlink",
    "pcie",
    "nic",
    "thermal",
    "power",
    "step",
    "checkpoint",
    "replica_checksum",
    "pod_failed",
    "pod_started",
    "node_not_ready",
    "node_ready",
    "probe_result",
    "pod_succeeded",
    "job_finished",
    "node_condition",
};

const char *gh_source_name(enum gh_source src)
{
    return (unsigned)src < GH_SRC__COUNT ? source_names[src] : "?";
}

const char *gh_kind_name(enum gh_kind kind)
{
    return (unsigned)kind < GH_KIND__COUNT ? kind_names[kind] : "?";
}

int gh_source_from_name(const char *name)
{
    for (int i = 0; i < GH_SRC__COUNT; i++)
        if (strcmp(name, source_names[i]) == 0)
            return i;
    return -1;
}

int gh_kind_from_name(const char *name)
{
    for (int i = 0; i < GH_KIND__COUNT; i++)
        if (strcmp(name, kind_names[i]) == 0)
            return i;
    return -1;
}

void gh_signal_init(struct gh_signal *s)
{
    memset(s, 0, sizeof *s);
    s->gpu = -1;
}

void gh_signal_clear(struct gh_signal *s)
{
    if (!s)
        return;
#define FREE_FIELD(f) free(s->f);
    GH_SIGNAL_STRINGS(FREE_FIELD)
#undef FREE_FIELD
    gh_signal_init(s);
}

int gh_signal_set_str(char **field, const char *v, size_t n)
{
    char *copy = NULL;
    if (v) {
        copy = malloc(n + 1);
        if (!copy)
            return GH_ENOMEM;
        memcpy(copy, v, n);
        copy[n] = '\0';
    }
    free(*field);
    *field = copy;
    return GH_OK;
}

int gh_signal_copy(struct gh_signal *dst, const struct gh_signal *src, struct gh_err *err)
{
    *dst = *src;
#define NULL_FIELD(f) dst->f = NULL;
    GH_SIGNAL_STRINGS(NULL_FIELD)
#undef NULL_FIELD
#define COPY_FIELD(f)                                                          \
    if (src->f && gh_signal_set_str(&dst->f, src->f, strlen(src->f))) {        \
        gh_signal_clear(dst);                                                  \
        return gh_err_set(err, GH_ENOMEM, "copying signal field " #f);         \
    }
    GH_SIGNAL_STRINGS(COPY_FIELD)
#undef COPY_FIELD
    return GH_OK;
}
