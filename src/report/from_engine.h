/* from_engine.h - feeds the engine's decisions (engine/incident.h) into a
 * report: the incident, its evidence with each signal's JSON as the raw
 * line. Used by `gpuheal report --scenario` from its replay callback. */
#ifndef GH_REPORT_FROM_ENGINE_H
#define GH_REPORT_FROM_ENGINE_H

#include "engine/incident.h"
#include "report/report.h"

/* Adds inc (borrowed) unless neither its node, its job nor any evidence
 * concerns the report's subject. GH_OK or GH_ENOMEM. */
int gh_report_add_engine_incident(struct gh_report *r, const struct gh_incident *inc,
                                  struct gh_err *err);

#endif
