/* level.h - a level state (thermal, power) reported with a hold-down, as
 * the NVML source (nvml_derive.c) and the dcgm-exporter scraper
 * (dcgm_exporter.c) report them: a change of state is said at once the
 * first time, then at most once per hold-down, so a GPU hovering at its
 * threshold does not flood; no hysteresis. Internal to src/agent/. */
#ifndef GH_AGENT_LEVEL_H
#define GH_AGENT_LEVEL_H

#include <stdbool.h>
#include <stdint.h>

struct gh_level {
    bool ever;          /* emitted at least once */
    int emitted;        /* state last emitted (0 = normal) */
    int64_t emitted_at; /* source clock */
};

/* Whether the change to `state` at `now` is reported now; when it is, *lv
 * records it. */
static inline bool gh_level_due(struct gh_level *lv, int state, int64_t now, int64_t holddown_ns)
{
    if (state == lv->emitted)
        return false;
    if (lv->ever && now - lv->emitted_at < holddown_ns)
        return false;
    lv->ever = true;
    lv->emitted = state;
    lv->emitted_at = now;
    return true;
}

#endif
