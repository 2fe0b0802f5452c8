/* fuzz_kubeconfig.c - libFuzzer target for the kubeconfig parser (libyaml
 * into jansson, then context/cluster/user resolution and base64 decoding).
 * File references are refused (GH_KUBECONFIG_NO_FILES): the fuzzer must
 * not read the machine's files. */
#include <stddef.h>
#include <stdint.h>

#include "kube/kubeconfig.h"
#include "kube/yaml_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gh_kube_config cfg;
    struct gh_err err;
    if (gh_kubeconfig_parse((const char *)data, size, "/nonexistent", NULL, GH_KUBECONFIG_NO_FILES,
                            &cfg, &err) == GH_OK)
        gh_kube_config_clear(&cfg);
    /* a named context too, to walk the lookup paths without current-context */
    if (gh_kubeconfig_parse((const char *)data, size, NULL, "x", GH_KUBECONFIG_NO_FILES, &cfg,
                            &err) == GH_OK)
        gh_kube_config_clear(&cfg);
    return 0;
}
