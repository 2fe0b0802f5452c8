/* fuzz_kube_signals.c - libFuzzer target for the Node-object translation of
 * kube_signals.c (what the Node informer hands the controller: any JSON the
 * API server or a watch could deliver) and the --node-conditions list
 * parser. The bytes are a JSON array [old, new] (old may be null) or any
 * other value (then new, with no old); the watched list is the default,
 * or the first string of the array when it parses. Every signal produced
 * must encode (gh_signal_encode: the codec's own checks), be a
 * node_condition of a watched type with a node and an id, and never more
 * than the cap; a list that parses must hold only valid, distinct names
 * that it says it has (aborts otherwise). The same pair read as Pods
 * (gh_kube_pod_signals: failures, restarts, containers waiting in
 * CreateContainerError, the kubelet's admission refusals): at most the
 * cap, pod kinds with ids, a failure with its reason. Seeds:
 * test/fuzz/kube_signals/. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/kube_signals.h"
#include "signal/signal_json.h"

static void check_list(const struct gh_node_conditions *w)
{
    if (w->n < 0 || w->n > GH_NODE_CONDITIONS_MAX)
        abort();
    for (int i = 0; i < w->n; i++) {
        size_t n = strnlen(w->names[i], GH_NODE_CONDITION_NAME_MAX);
        if (n == 0 || n >= GH_NODE_CONDITION_NAME_MAX || !gh_node_conditions_has(w, w->names[i]))
            abort();
        for (int j = 0; j < i; j++)
            if (!strcmp(w->names[i], w->names[j]))
                abort();
        if (!strcmp(w->names[i], "Ready") || !strcmp(w->names[i], "GPUHealthy"))
            abort();
    }
}

static void check_signals(const struct gh_node_conditions *w, struct gh_signal *s, size_t n,
                          size_t max)
{
    if (n > max)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (s[i].kind != GH_KIND_NODE_CONDITION || !s[i].node || !s[i].id || !s[i].condition ||
            !gh_node_conditions_has(w, s[i].condition))
            abort();
        char *line = NULL;
        struct gh_err err = {{0}};
        if (gh_signal_encode(&s[i], &line, &err) != GH_OK) {
            /* a Node name the codec refuses (empty) is the API server's to
             * forbid; anything else is a bug */
            if (s[i].node[0])
                abort();
        }
        free(line);
        gh_signal_clear(&s[i]);
    }
}

/* Pod signals: at most max, each a pod kind with an id (its duplicate
 * key); a pod_failed has a reason. */
static void check_pod_signals(struct gh_signal *s, size_t n, size_t max)
{
    if (n > max)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (!s[i].id || (s[i].kind != GH_KIND_POD_FAILED && s[i].kind != GH_KIND_POD_STARTED &&
                         s[i].kind != GH_KIND_POD_SUCCEEDED))
            abort();
        if (s[i].kind == GH_KIND_POD_FAILED && !s[i].reason)
            abort();
        gh_signal_clear(&s[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct gh_node_conditions w;
    struct gh_err err = {{0}};
    /* the bytes as a --node-conditions list */
    if (gh_node_conditions_parse(text, &w, &err) == GH_OK)
        check_list(&w);
    else if (!err.msg[0])
        abort();
    if (gh_node_conditions_parse(GH_NODE_CONDITIONS_DEFAULT, &w, &err) != GH_OK)
        abort();
    json_t *doc = json_loadb(text, size, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    if (!doc)
        return 0;
    const json_t *old = NULL, *node = doc;
    if (json_is_array(doc) && json_array_size(doc) >= 2) {
        old = json_array_get(doc, 0);
        node = json_array_get(doc, 1);
        if (json_is_null(old))
            old = NULL;
        const char *list = json_string_value(json_array_get(doc, 2));
        struct gh_node_conditions custom;
        if (list && gh_node_conditions_parse(list, &custom, &err) == GH_OK)
            w = custom;
    }
    struct gh_signal s[GH_KUBE_SIGNALS_MAX];
    for (size_t max = 1; max <= GH_KUBE_SIGNALS_MAX; max += GH_KUBE_SIGNALS_MAX - 1) {
        size_t n = gh_kube_node_condition_signals(old, node, &w, 1, s, max);
        check_signals(&w, s, n, max);
    }
    size_t n = gh_kube_node_condition_signals(old, node, &w, 1, s, 99); /* capped by the callee */
    check_signals(&w, s, n, GH_KUBE_SIGNALS_MAX);
    /* the same pair as Pods (issue 25: the waiting states of containers
     * the runtime cannot create, the kubelet's admission refusals) */
    for (size_t max = 1; max <= GH_KUBE_SIGNALS_MAX + 1; max += GH_KUBE_SIGNALS_MAX) {
        n = gh_kube_pod_signals(old, node, 1, s, max);
        check_pod_signals(s, n, max < GH_KUBE_SIGNALS_MAX ? max : GH_KUBE_SIGNALS_MAX);
    }
    json_decref(doc);
    return 0;
}
