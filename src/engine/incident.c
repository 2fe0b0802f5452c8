/* incident.c - the JSON form of an incident (spec section 3). */
#include "engine/incident.h"

#include <math.h>
#include <stdlib.h>

#include "common/timeutil.h"
#include "signal/signal_json.h"

static int set_new(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

json_t *gh_incident_to_json(const struct gh_incident *inc)
{
    char ts[GH_RFC3339_MAX];
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = 0;
    bad |= set_new(o, "id", json_string(inc->id));
    bad |= set_new(o, "class", json_string(gh_class_name(inc->cls)));
    if (inc->node)
        bad |= set_new(o, "node", json_string(inc->node));
    if (inc->gpu >= 0)
        bad |= set_new(o, "gpu", json_integer(inc->gpu));
    if (inc->job)
        bad |= set_new(o, "job", json_string(inc->job));
    bad |= set_new(o, "first_ts", json_string(gh_time_format_rfc3339(inc->first_ts, ts, sizeof ts)));
    bad |= set_new(o, "decided_ts",
                   json_string(gh_time_format_rfc3339(inc->decided_ts, ts, sizeof ts)));
    json_t *acts = json_array();
    for (int i = 0; acts && i < inc->n_actions; i++)
        bad |= json_array_append_new(acts, json_string(gh_action_name(inc->actions[i])));
    bad |= set_new(o, "actions", acts);
    if (inc->has_checkpoint) {
        json_t *c = json_object();
        if (c) {
            bad |= set_new(c, "step", json_integer(inc->checkpoint_step));
            if (inc->checkpoint_path)
                bad |= set_new(c, "path", json_string(inc->checkpoint_path));
        }
        bad |= set_new(o, "checkpoint", c);
    }
    json_t *ev = json_array();
    for (size_t i = 0; ev && i < inc->n_evidence; i++)
        bad |= json_array_append_new(ev, gh_signal_encode_json(&inc->evidence[i]->sig));
    bad |= set_new(o, "evidence", ev);
    bad |= set_new(o, "rule", json_string(inc->rule ? inc->rule : ""));
    bad |= set_new(o, "reason", json_string(inc->reason));
    bad |= set_new(o, "severity", json_string(gh_severity_name(inc->severity)));
    if (inc->escalation)
        bad |= set_new(o, "escalation", json_integer(inc->escalation));
    /* impact: what the fault did to the job, how urgent the hardware is,
     * and the actions that wait for a safe moment (docs/engine.md) */
    json_t *im = json_object();
    if (im) {
        bad |= set_new(im, "job", json_string(gh_impact_name(inc->impact)));
        if (inc->has_slowdown)
            bad |= set_new(im, "slowdown", json_real(round(inc->slowdown * 1e4) / 1e4));
        bad |= set_new(im, "hardware", json_string(inc->urgent ? "urgent" : "can_wait"));
        if (inc->n_deferred) {
            json_t *d = json_array();
            for (int i = 0; d && i < inc->n_deferred; i++)
                bad |= json_array_append_new(d, json_string(gh_action_name(inc->deferred[i])));
            bad |= set_new(im, "deferred", d);
        }
    }
    bad |= set_new(o, "impact", im);
    if (inc->scope != GH_SCOPE_UNSAID) {
        bad |= set_new(o, "scope", json_string(gh_scope_name(inc->scope)));
        if (inc->component)
            bad |= set_new(o, "component", json_string(inc->component));
        json_t *an = json_array();
        for (size_t i = 0; an && i < inc->n_affected; i++)
            bad |= json_array_append_new(an, json_string(inc->affected_nodes[i]));
        bad |= set_new(o, "affected_nodes", an);
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int gh_incident_encode(const struct gh_incident *inc, char **out, struct gh_err *err)
{
    json_t *o = gh_incident_to_json(inc);
    /* 15 significant digits: a number read from text with up to 15 (every
     * signal's) prints as it was written ("1087.17", not the 17-digit
     * "1087.1700000000001" of its nearest double) */
    *out = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(o);
    if (!*out)
        return gh_err_set(err, GH_ENOMEM, "incident: out of memory encoding");
    return GH_OK;
}
