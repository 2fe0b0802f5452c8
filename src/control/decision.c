/* decision.c - a decision's fields from the engine's incident or from its
 * object (see decision.h). */
#include "control/decision.h"

#include <string.h>

#include "common/json.h"

/* The strings, and the pods named in the evidence (the first
 * GH_DECISION_PODS_MAX with both a namespace and a pod). */
static void read_strings(struct gh_decision *d, const json_t *obj)
{
    d->id = gh_json_str(obj, "id");
    d->node = gh_json_str(obj, "node");
    d->job = gh_json_str(obj, "job");
    d->rule = gh_json_str(obj, "rule");
    d->component = gh_json_str(obj, "component");
    const char *scope = gh_json_str(obj, "scope");
    int sc = scope ? gh_scope_from_name(scope) : -1;
    d->scope = sc > 0 ? (enum gh_scope)sc : GH_SCOPE_UNSAID;
    d->n_affected = json_array_size(json_object_get(obj, "affected_nodes"));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(obj, "evidence"), i, e)
    {
        const char *ns = gh_json_str(e, "namespace"), *pod = gh_json_str(e, "pod");
        if (ns && pod && d->n_pods < GH_DECISION_PODS_MAX) {
            d->pods[d->n_pods].ns = ns;
            d->pods[d->n_pods].name = pod;
            d->n_pods++;
        }
    }
}

void gh_decision_from_incident(struct gh_decision *d, const struct gh_incident *inc,
                               const json_t *obj)
{
    memset(d, 0, sizeof *d);
    read_strings(d, obj);
    d->cls = (int)inc->cls;
    d->scope = inc->scope;
    d->n_affected = inc->n_affected;
    d->gpu = inc->gpu >= 0 ? inc->gpu : -1;
    for (int i = 0; i < inc->n_actions && d->n_actions < GH_TASK_MAX_ACTIONS; i++)
        d->actions[d->n_actions++] = inc->actions[i];
    d->has_checkpoint = inc->has_checkpoint;
    d->checkpoint_step = inc->has_checkpoint ? inc->checkpoint_step : -1;
    d->checkpoint_path = inc->has_checkpoint ? gh_json_str(obj, "checkpoint", "path") : NULL;
}

void gh_decision_read(struct gh_decision *d, const json_t *obj)
{
    memset(d, 0, sizeof *d);
    read_strings(d, obj);
    const char *cls = gh_json_str(obj, "class");
    d->cls = gh_class_from_name(cls ? cls : "");
    json_t *gpu = json_object_get(obj, "gpu");
    d->gpu = json_is_integer(gpu) ? (int)json_integer_value(gpu) : -1;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(obj, "actions"), i, a)
    {
        int x = gh_action_from_name(json_string_value(a) ? json_string_value(a) : "");
        if (x >= 0 && d->n_actions < GH_TASK_MAX_ACTIONS)
            d->actions[d->n_actions++] = (enum gh_action)x;
    }
    json_t *ck = json_object_get(obj, "checkpoint");
    json_t *step = json_object_get(ck, "step");
    d->has_checkpoint = json_is_object(ck);
    d->checkpoint_step = json_is_integer(step) ? json_integer_value(step) : -1;
    d->checkpoint_path = gh_json_str(ck, "path");
}
