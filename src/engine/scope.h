/* scope.h - which Node labels name a component that several nodes share,
 * and what kind of component: the label key's own words, so a site's keys
 * (example.com/ib-leaf-rail2, cloud topology blocks, GPU Feature
 * Discovery's nvidia.com/gpu.clique) need no configuration. */
#ifndef GH_ENGINE_SCOPE_H
#define GH_ENGINE_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/topology.h"
#include "signal/taxonomy.h"

/* The scope of the component a label key names: GH_SCOPE_NVLINK_DOMAIN for
 * an NVLink domain (clique, nvlink), GH_SCOPE_SWITCH for a switch, leaf,
 * spine, rail or network block, GH_SCOPE_RACK for a rack, power or PDU,
 * GH_SCOPE_FLEET for what a rollout or a zone shares (driver, firmware,
 * zone, image); GH_SCOPE_UNSAID for a key that names no shared component
 * (hostname, roles, a GPU count). */
enum gh_scope gh_scope_of_label(const char *key);

/* The component the nodes (topology indices nodes[0..n)) share by their
 * labels: the most specific scope (NVLink domain, rack, switch, fleet) of
 * a label key whose value is the same on all of them, written as
 * "KEY=VALUE" to component (cap bytes). Among keys of one scope, one that
 * ends in the number hint ends in wins (a NIC mlx5_5's rail: every node
 * under one unit's leaves shares all its rails' labels); hint may be NULL.
 * A label every node of the topology carries with that value, unaffected
 * nodes included (n below the node count), sets nothing apart: it counts
 * as GH_SCOPE_FLEET whatever its key says.
 * GH_SCOPE_UNSAID (component "") when no such label joins them all. */
enum gh_scope gh_scope_common(const struct gh_topology *t, const uint32_t *nodes, size_t n,
                              const char *hint, char *component, size_t cap);
/* Whether node i carries a label of scope sc. */
bool gh_scope_labelled(const struct gh_topology *t, size_t node, enum gh_scope sc);

#endif
