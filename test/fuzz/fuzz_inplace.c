/* fuzz_inplace.c - libFuzzer target for what the in-place rung reads from
 * a pod (control/job_inplace.h; any JSON the API server could hand back):
 * the exit code of its RestartAllContainers rule, its containers' restart
 * counts, whether it runs. The bytes are a pod object (its "spec" is read)
 * or a PodSpec. A code is -1 or 1..255, with a reason when -1 (aborts
 * otherwise). Seeds: test/fuzz/inplace/. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/job_inplace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o = json_loadb((const char *)data, size, 0, NULL);
    if (!o)
        return 0;
    const json_t *spec = json_is_object(json_object_get(o, "spec")) ? json_object_get(o, "spec")
                                                                    : o;
    char why[200] = "";
    int code = gh_inplace_exit_code(spec, why, sizeof why);
    if (code != -1 && (code < 1 || code > 255))
        abort();
    if (code == -1 && why[0] == '\0')
        abort();
    (void)gh_inplace_restarts(o);
    (void)gh_inplace_running(o);
    json_decref(o);
    return 0;
}
