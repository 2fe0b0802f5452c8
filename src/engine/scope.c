/* scope.c - a Node label key to the kind of component it names. */
#include "engine/scope.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
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

enum gh_scope gh_scope_common(const struct gh_topology *t, const uint32_t *nodes, size_t n,
                              char *component, size_t cap)
{
    enum gh_scope best = GH_SCOPE_UNSAID;
    if (cap)
        component[0] = '\0';
    if (n == 0)
        return best;
    /* the first node's labels are the candidates; each must hold on all */
    for (const char *p = gh_topology_node_labels(t, nodes[0]); p && *p;) {
        const char *key = p, *value = p + strlen(p) + 1;
        p = value + strlen(value) + 1;
        enum gh_scope sc = gh_scope_of_label(key);
        if (specific(sc) <= specific(best))
            continue;
        bool all = true;
        for (size_t i = 1; i < n && all; i++) {
            const char *v = gh_topology_node_label(t, nodes[i], key);
            all = v && strcmp(v, value) == 0;
        }
        if (all) {
            best = sc;
            if (cap)
                snprintf(component, cap, "%s=%s", key, value);
        }
    }
    return best;
}
