/* fleet.h - the shared-cause detector's hand in the decision stage
 * (det_fleet.c): a finding whose signature several nodes show is decided
 * as one cause of theirs, not as its node's own. */
#ifndef GH_ENGINE_FLEET_H
#define GH_ENGINE_FLEET_H

#include <stdbool.h>

#include "engine/detector.h"

/* The fleet detector's state (NULL when it does not run) takes finding f
 * (borrowed) before the decision stage: true when f is part of a shared
 * cause, decided so, with what became of it in *out; false: decide f as
 * usual. */
bool gh_fleet_take(void *state, struct gh_engine *e, const struct gh_finding *f,
                   enum gh_outcome *out);
/* The decision stage is about to decide f about its node: true when f
 * waits instead (a copy is kept) for other nodes to show its signature (1 s
 * for its first node; settings.fleet.hold once others show it too, or
 * when f is harmless: it harms no job and the hardware can wait, so a
 * check rolled out over minutes is seen as one cause), then is decided
 * again (shared by then, or its node's own). */
bool gh_fleet_hold(void *state, struct gh_engine *e, const struct gh_finding *f, bool harmless);
/* Keeps a copy of f (borrowed) until stream time until, then decides it
 * again, its GPU index looked up again from its evidence (the reading
 * that maps a PCI bus id to an index may come after the kernel-log line).
 * false when out of memory (f is decided now). */
/* Findings held and shared causes whose record is not decided yet: what
 * the engine will still decide when their holds end (0: nothing waits). */
size_t gh_fleet_waiting(const void *state);
bool gh_fleet_hold_until(void *state, const struct gh_finding *f, int64_t until);

#endif
