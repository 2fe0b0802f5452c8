/* decision.h - fills a decision (control/task-t.h) where an incident
 * enters the controller: once from the engine's struct gh_incident, or
 * from an incident object read back from the audit store (an approval
 * after a restart, a replay, a decision the executor handed back). */
#ifndef GH_CONTROL_DECISION_H
#define GH_CONTROL_DECISION_H

#include <jansson.h>

#include "control/task-t.h"
#include "engine/incident.h"

/* d from the engine's incident inc (borrowed for the call) and obj, the
 * object gh_incident_to_json made of it (borrowed: d's strings point into
 * it). The class, GPU, actions, checkpoint, scope and the number of
 * affected nodes come from inc. */
void gh_decision_from_incident(struct gh_decision *d, const struct gh_incident *inc,
                               const json_t *obj);

/* d from an incident object (spec section 3; borrowed: d's strings point
 * into it). A field that is absent or of another type is "none" (NULL,
 * -1); action and class names this build does not know are left out (-1
 * for the class). obj NULL: everything none. */
void gh_decision_read(struct gh_decision *d, const json_t *obj);

#endif
