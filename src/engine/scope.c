/* scope.c - a Node label key to the kind of component it names. */
#include "engine/scope.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Case-insensitive substring search, bounded by the key's length. */
static bool has(const char *key, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = key; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == word[i])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

enum gh_scope gh_scope_of_label(const char *key)
{
    if (!key || !*key)
        return GH_SCOPE_UNSAID;
    /* Keys that name one node or a property of it, never a component. */
    if (has(key, "hostname") || has(key, "instance-type") || has(key, "node-role") ||
        has(key, "gpu.count") || has(key, "gpu.product") || has(key, "gpu.memory") ||
        has(key, "gpu.present") || has(key, "arch") || has(key, "/os"))
        return GH_SCOPE_UNSAID;
    /* Most specific first: an NVLink domain lies within a rack, a rack
     * under a leaf switch. */
    if (has(key, "clique") || has(key, "nvlink") || has(key, "nvl-domain") || has(key, "nvswitch"))
        return GH_SCOPE_NVLINK_DOMAIN;
    if (has(key, "rack") || has(key, "pdu") || has(key, "power"))
        return GH_SCOPE_RACK;
    if (has(key, "leaf") || has(key, "spine") || has(key, "switch") || has(key, "rail") ||
        has(key, "network-node-layer") || has(key, "topology-block") || has(key, "subblock") ||
        has(key, "fabric"))
        return GH_SCOPE_SWITCH;
    if (has(key, "driver") || has(key, "firmware") || has(key, "zone") || has(key, "image") ||
        has(key, "kernel-version") || has(key, "cuda"))
        return GH_SCOPE_FLEET;
    return GH_SCOPE_UNSAID;
}

/* Rank of a scope for "most specific first". */
static int specific(enum gh_scope s)
{
    switch (s) {
    case GH_SCOPE_NVLINK_DOMAIN: return 4;
    case GH_SCOPE_RACK: return 3;
    case GH_SCOPE_SWITCH: return 2;
    case GH_SCOPE_FLEET: return 1;
    default: return 0;
    }
}

/* The number a string ends in (-1: none): "mlx5_5" 5, "rail5" 5. */
static long trailing_number(const char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && isdigit((unsigned char)s[i - 1]))
        i--;
    if (i == n || n - i > 6)
        return -1;
    return strtol(s + i, NULL, 10);
}

/* Whether every node of the topology carries key=value. */
static bool fleet_wide(const struct gh_topology *t, const char *key, const char *value)
{
    for (size_t i = 0; i < gh_topology_node_count(t); i++) {
        const char *v = gh_topology_node_label(t, i, key);
        if (!v || strcmp(v, value) != 0)
            return false;
    }
    return true;
}

enum gh_scope gh_scope_common(const struct gh_topology *t, const uint32_t *nodes, size_t n,
                              const char *hint, char *component, size_t cap)
{
    enum gh_scope best = GH_SCOPE_UNSAID;
    int best_rank = 0;
    long want = hint ? trailing_number(hint) : -1;
    if (cap)
        component[0] = '\0';
    if (n == 0)
        return best;
    /* the first node's labels are the candidates; each must hold on all */
    const char *it = gh_topology_node_labels(t, nodes[0]), *key, *value;
    while (gh_topology_label_next(&it, &key, &value)) {
        enum gh_scope sc = gh_scope_of_label(key);
        int rank = 2 * specific(sc) + (want >= 0 && trailing_number(key) == want);
        if (specific(sc) == 0 || rank <= best_rank)
            continue;
        bool all = true;
        for (size_t i = 1; i < n && all; i++) {
            const char *v = gh_topology_node_label(t, nodes[i], key);
            all = v && strcmp(v, value) == 0;
        }
        if (all && sc != GH_SCOPE_FLEET && n < gh_topology_node_count(t) &&
            fleet_wide(t, key, value)) {
            /* every node of the fleet shares it, the unaffected too: it
             * does not set the affected apart, so it names the fleet */
            sc = GH_SCOPE_FLEET;
            rank = 2 * specific(sc) + (want >= 0 && trailing_number(key) == want);
            if (rank <= best_rank)
                continue;
        }
        if (all) {
            best = sc;
            best_rank = rank;
            if (cap)
                snprintf(component, cap, "%s=%s", key, value);
        }
    }
    return best;
}

bool gh_scope_labelled(const struct gh_topology *t, size_t node, enum gh_scope sc)
{
    const char *it = gh_topology_node_labels(t, node), *key, *value;
    while (gh_topology_label_next(&it, &key, &value))
        if (gh_scope_of_label(key) == sc)
            return true;
    return false;
}
