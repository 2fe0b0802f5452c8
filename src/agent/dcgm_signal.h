/* dcgm_signal.h - the last step both DCGM sources share (dcgm_exporter.c,
 * dcgm_health.c): fill a signal's node, pci, counter and msg, emit it,
 * clear it. Internal to src/agent/. */
#ifndef GH_AGENT_DCGM_SIGNAL_H
#define GH_AGENT_DCGM_SIGNAL_H

#include <string.h>

#include "agent/dcgm.h"

#define GH_DCGM_MSG_MAX 512  /* a signal's msg */
#define GH_DCGM_NVL_LINKS 18 /* NVLink links per GPU that DCGM's fields name */

/* Fills node/pci/msg/counter of s (strings copied), emits it, clears it.
 * GH_ENOMEM when a copy fails (the signal is dropped). */
static inline int gh_dcgm_signal_emit(gh_dcgm_emit_fn emit, void *ctx, struct gh_signal *s,
                                      const char *node, const char *pci, const char *counter,
                                      const char *msg)
{
    int rc = GH_OK;
    if (gh_signal_set_str(&s->node, node, strlen(node)) ||
        gh_signal_set_str(&s->msg, msg, strlen(msg)) ||
        (pci && pci[0] && gh_signal_set_str(&s->pci, pci, strlen(pci))) ||
        (counter && gh_signal_set_str(&s->counter, counter, strlen(counter))))
        rc = GH_ENOMEM;
    if (rc == GH_OK)
        emit(ctx, s);
    gh_signal_clear(s);
    return rc;
}

#endif
