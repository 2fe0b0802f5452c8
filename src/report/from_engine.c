/* from_engine.c - turns one engine incident (engine/incident.h) into the
 * report's incident and evidence rows. */
#include <stdlib.h>

#include "report/from_engine.h"
#include "signal/signal_json.h"

static bool concerns(const struct gh_report *r, const struct gh_incident *inc)
{
    if (gh_report_concerns(r, inc->node, inc->job))
        return true;
    for (size_t i = 0; i < inc->n_evidence; i++)
        if (gh_report_concerns(r, inc->evidence[i]->sig.node, inc->evidence[i]->sig.job))
            return true;
    return false;
}

int gh_report_add_engine_incident(struct gh_report *r, const struct gh_incident *inc,
                                  struct gh_err *err)
{
    if (!concerns(r, inc))
        return GH_OK;
    const char *acts[GH_INCIDENT_MAX_ACTIONS];
    size_t na = 0;
    for (int i = 0; i < inc->n_actions && i < GH_INCIDENT_MAX_ACTIONS; i++)
        acts[na++] = gh_action_name(inc->actions[i]);
    struct gh_report_incident in = {
        .id = inc->id,
        .cls = gh_class_name(inc->cls),
        .severity = gh_severity_name(inc->severity),
        .node = inc->node,
        .job = inc->job,
        .rule = inc->rule,
        .reason = inc->reason,
        .gpu = inc->gpu,
        .first_ns = inc->first_ts,
        .decided_ns = inc->decided_ts,
        .actions = acts,
        .n_actions = na,
        .ckpt_step = inc->has_checkpoint ? inc->checkpoint_step : -1,
        .ckpt_path = inc->has_checkpoint ? inc->checkpoint_path : NULL,
    };
    long idx;
    int rc = gh_report_add_incident(r, &in, &idx, err);
    for (size_t i = 0; !rc && idx >= 0 && i < inc->n_evidence; i++) {
        const struct gh_signal *s = &inc->evidence[i]->sig;
        char *raw = NULL;
        if (!s->msg && gh_signal_encode(s, &raw, NULL) != GH_OK)
            raw = NULL;
        rc = gh_report_add_evidence(r, idx, s, raw, err);
        free(raw);
    }
    return rc;
}
