/* fuzz_dcgm_state.c - libFuzzer target for the agent's shipped-XID state
 * file parser (agent/dcgm_shipped.h): never crashes, takes nothing from a
 * file it refuses, and a file it takes is written back and read again to
 * the same records. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/dcgm_shipped.h"

#define GPUS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gh_dcgm_xid_seen v[GPUS], w[GPUS];
    bool same = false, same2 = false;
    struct gh_err err;
    int rc = gh_dcgm_shipped_parse((const char *)data, size, "boot", v, GPUS, &same, &err);
    if (rc != GH_OK) {
        for (int g = 0; g < GPUS; g++)
            if (v[g].known)
                abort(); /* a refused file gives nothing */
        return 0;
    }
    if (!same)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/gh-fuzz-dcgm-state-%d", (int)getpid());
    if (gh_dcgm_shipped_save(path, "boot", v, GPUS, &err) != GH_OK)
        return 0;
    if (gh_dcgm_shipped_load(path, "boot", w, GPUS, &same2, &err) != GH_OK || !same2)
        abort();
    unlink(path);
    for (int g = 0; g < GPUS; g++) {
        if (v[g].known != w[g].known || v[g].has_last != w[g].has_last ||
            (v[g].has_last && v[g].last != w[g].last) || v[g].n != w[g].n)
            abort();
        for (unsigned k = 0; k < v[g].n; k++)
            if (v[g].xid[k].code != w[g].xid[k].code || v[g].xid[k].count != w[g].xid[k].count)
                abort();
    }
    return 0;
}
