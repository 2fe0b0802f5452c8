/* scope.h - which Node labels name a component that several nodes share,
 * and what kind of component: the label key's own words, so a site's keys
 * (example.com/ib-leaf-rail2, cloud topology blocks, GPU Feature
 * Discovery's nvidia.com/gpu.clique) need no configuration. */
#ifndef GH_ENGINE_SCOPE_H
#define GH_ENGINE_SCOPE_H

#include "signal/taxonomy.h"

/* The scope of the component a label key names: GH_SCOPE_NVLINK_DOMAIN for
 * an NVLink domain (clique, nvlink), GH_SCOPE_SWITCH for a switch, leaf,
 * spine, rail or network block, GH_SCOPE_RACK for a rack, power or PDU,
 * GH_SCOPE_FLEET for what a rollout or a zone shares (driver, firmware,
 * zone, image); GH_SCOPE_UNSAID for a key that names no shared component
 * (hostname, roles, a GPU count). */
enum gh_scope gh_scope_of_label(const char *key);

#endif
