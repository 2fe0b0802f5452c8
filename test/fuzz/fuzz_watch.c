/* fuzz_watch.c - libFuzzer target for the watch-stream decoder and what the
 * informer does with each event (Status decoding of ERROR events, the
 * store's projection and indexes). The first input byte picks the chunk
 * size, so framing across chunk boundaries is exercised. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/status.h"
#include "kube/store.h"
#include "kube/watch.h"

static int on_event(void *ud, enum gh_kube_ev_type t, json_t *obj, struct gh_err *err)
{
    struct gh_kube_store *s = ud;
    struct gh_kube_status st;
    enum gh_kube_change chg;
    json_t *kept = NULL, *old = NULL;
    (void)err;
    switch (t) {
    case GH_KUBE_EV_ERROR:
        gh_kube_status_from_json(&st, obj);
        (void)gh_kube_status_rc(&st);
        break;
    case GH_KUBE_EV_DELETED:
        gh_kube_store_remove(s, obj, &old, NULL);
        break;
    case GH_KUBE_EV_BOOKMARK:
        break;
    default:
        gh_kube_store_upsert(s, obj, &chg, &kept, &old, NULL);
        break;
    }
    json_decref(kept);
    json_decref(old);
    return GH_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    static const char *const keep[] = {"/spec/nodeName", "/status/phase", "/metadata/labels"};
    static const struct gh_kube_index_spec idx[] = {
        {"node", {"/spec/nodeName", NULL}},
        {"job", {"/metadata/labels/batch.kubernetes.io~1job-name", "/metadata/labels/job-name",
                 NULL}},
    };
    struct gh_kube_store_opts so = {keep, 3, idx, 2};
    struct gh_kube_store *s = NULL;
    struct gh_kube_watch_decoder *d = NULL;
    if (gh_kube_store_new(&so, &s, NULL) ||
        gh_kube_watch_decoder_new(1u << 16, on_event, s, &d, NULL)) {
        gh_kube_store_free(s);
        return 0;
    }
    struct gh_err err;
    int rc = GH_OK;
    for (size_t i = 0; i < size && rc == GH_OK; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        rc = gh_kube_watch_decoder_feed(d, (const char *)data + i, n, &err);
    }
    if (rc == GH_OK)
        (void)gh_kube_watch_decoder_finish(d, &err);
    gh_kube_store_mark_begin(s);
    gh_kube_store_sweep(s, NULL, NULL, NULL);
    gh_kube_watch_decoder_free(d);
    gh_kube_store_free(s);
    return 0;
}
