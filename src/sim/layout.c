/* layout.c - racks, leaf switches and the Node labels of simulated nodes. */
#include "sim/layout.h"

#include <stdio.h>
#include <string.h>

int gh_sim_rails(const struct gh_sim_config *c)
{
    return c->gpus_per_node < GH_SIM_RAILS_MAX ? c->gpus_per_node : GH_SIM_RAILS_MAX;
}

int gh_sim_leaf_group(const struct gh_sim_config *c, int node)
{
    return c->nodes_per_leaf > 0 ? node / c->nodes_per_leaf : 0;
}

int gh_sim_leaf_groups(const struct gh_sim_config *c, int n_nodes)
{
    return n_nodes > 0 ? gh_sim_leaf_group(c, n_nodes - 1) + 1 : 0;
}

void gh_sim_driver_version(int driver, char *buf, size_t cap)
{
    snprintf(buf, cap, "570.124.%02d", 6 + driver);
}

/* Appends key = value to out (both copied into its buffer); a pair that
 * does not fit is left out. */
static void add(struct gh_sim_labels *out, size_t *used, const char *key, const char *value)
{
    size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
    if (out->n >= GH_SIM_LABELS_MAX || *used + kl + vl > sizeof out->buf)
        return;
    char *k = out->buf + *used;
    memcpy(k, key, kl);
    memcpy(k + kl, value, vl);
    *used += kl + vl;
    out->keys[out->n] = k;
    out->values[out->n] = k + kl;
    out->n++;
}

void gh_sim_node_labels(const struct gh_sim_config *c, int node, int driver,
                        struct gh_sim_labels *out)
{
    size_t used = 0;
    char k[64], v[64];
    out->n = 0;
    if (c->nodes_per_rack > 0) {
        snprintf(v, sizeof v, "rack-%04d", node / c->nodes_per_rack);
        add(out, &used, "example.com/rack", v);
    }
    int su = gh_sim_leaf_group(c, node);
    for (int r = 0; c->nodes_per_leaf > 0 && r < gh_sim_rails(c); r++) {
        snprintf(k, sizeof k, "example.com/ib-leaf-rail%d", r);
        snprintf(v, sizeof v, "su%03d-rail%d", su, r);
        add(out, &used, k, v);
    }
    gh_sim_driver_version(driver, v, sizeof v);
    add(out, &used, "nvidia.com/cuda.driver-version.full", v);
}
