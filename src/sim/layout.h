/* layout.h - where the simulated cluster's nodes sit, and the Node labels
 * that say so (spec section 2, node_labels), so that the engine can name a
 * component several nodes share.
 *
 * A rail-optimised fabric as in NVIDIA's DGX SuperPOD reference
 * architecture: nodes come in groups of nodes_per_leaf (a scalable unit),
 * and each group has one leaf switch per rail: NIC r (mlx5_r) of every node
 * of the group goes to the group's leaf r. Racks hold nodes_per_rack
 * consecutive nodes. Node i's labels:
 *
 *   example.com/rack                      rack-0012
 *   example.com/ib-leaf-rail<r>           su003-rail<r>      (r < gh_sim_rails)
 *   nvidia.com/cuda.driver-version.full   570.124.06         (its driver: rollouts change it)
 *
 * Pure functions of the config and the node's index. */
#ifndef GH_SIM_LAYOUT_H
#define GH_SIM_LAYOUT_H

#include <stddef.h>

#include "sim/sim.h"

#define GH_SIM_RAILS_MAX 8
#define GH_SIM_LABELS_MAX (GH_SIM_RAILS_MAX + 2)

/* One node's labels: keys[i] = values[i], pointing into buf. */
struct gh_sim_labels {
    size_t n;
    const char *keys[GH_SIM_LABELS_MAX];
    const char *values[GH_SIM_LABELS_MAX];
    char buf[768];
};

/* Rails (NICs with a leaf of their own) per node: one per GPU, at most
 * GH_SIM_RAILS_MAX. */
int gh_sim_rails(const struct gh_sim_config *c);
/* The leaf group (scalable unit) of node, and how many groups n_nodes fill. */
int gh_sim_leaf_group(const struct gh_sim_config *c, int node);
int gh_sim_leaf_groups(const struct gh_sim_config *c, int n_nodes);
/* The label value of driver version number `driver` (0: what the cluster
 * starts with; each rollout installs the next). */
void gh_sim_driver_version(int driver, char *buf, size_t cap);
/* Node's labels with driver version number `driver` into *out. */
void gh_sim_node_labels(const struct gh_sim_config *c, int node, int driver,
                        struct gh_sim_labels *out);

#endif
